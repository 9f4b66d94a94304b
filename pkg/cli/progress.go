package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Live progress: while wait polls, it can show the job's current live
// activity stage on stderr. The stages come from the owner-only debug route
// GET /v1/debug/jobs/{id}/activity; when the Gate does not serve it (or it
// fails or answers something invalid) progress turns itself off silently,
// since it is a convenience and never affects the outcome or exit code.

// maxActivityBytes bounds an activity answer.
const maxActivityBytes = 64 << 10

type activityRecord struct {
	Attempt   int    `json:"attempt"`
	AttemptID string `json:"attempt_id"`
	WorkerID  string `json:"worker_id"`
	Stage     string `json:"stage"`
	At        string `json:"at"`
}

type activityAnswer struct {
	Live     bool             `json:"live"`
	Activity []activityRecord `json:"activity"`
	AsOf     string           `json:"as_of"`
}

func validStage(s string) bool {
	switch s {
	case "analyzing", "editing", "testing", "preparing_result":
		return true
	}
	return false
}

func (a *activityAnswer) validate() error {
	if a.Activity == nil || !validTime(a.AsOf) {
		return errors.New("activity answer incomplete")
	}
	for _, r := range a.Activity {
		if r.Attempt < 1 || !ident.ValidRef(r.AttemptID) || !ident.ValidLane(r.WorkerID) || !validStage(r.Stage) || !validTime(r.At) {
			return errors.New("activity record invalid")
		}
	}
	return nil
}

// progress prints stage changes of one job.
type progress struct {
	enabled bool
	// shown: progress was asked for or stderr is a terminal. enabled
	// turns off when the activity route fails; delivery phases, read from
	// the job itself, are still shown.
	shown        bool
	last         string
	lastDelivery string
}

// stderrIsTerminal reports whether w is a character device (a terminal).
func stderrIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// poll fetches the job's live activity and prints the latest stage when it
// changed. Any failure disables progress for the rest of the wait.
func (p *progress) poll(ctx context.Context, cl *client, id string, stderr io.Writer) {
	if !p.enabled {
		return
	}
	var a activityAnswer
	err := cl.do(ctx, http.MethodGet, "/v1/debug/jobs/"+url.PathEscape(id)+"/activity", nil, http.StatusOK, &a)
	if err == nil {
		err = a.validate()
	}
	if err != nil || !a.Live {
		p.enabled = false
		return
	}
	if len(a.Activity) == 0 {
		return
	}
	r := a.Activity[len(a.Activity)-1]
	line := fmt.Sprintf("%s (attempt %d on %s)", r.Stage, r.Attempt, r.WorkerID)
	if line != p.last {
		p.last = line
		fmt.Fprintf(stderr, "forge: progress: %s\n", line)
	}
}

// delivery prints the delivery phase (and CI state) of a delivering job
// when it changed. It needs no extra request: the job object carries it.
func (p *progress) delivery(j *Job, stderr io.Writer) {
	if !p.shown || j.Delivery == nil {
		return
	}
	line := "delivery " + j.Delivery.Phase
	if j.Delivery.CIState != nil {
		line += " (ci " + *j.Delivery.CIState + ")"
	}
	if line != p.lastDelivery {
		p.lastDelivery = line
		fmt.Fprintf(stderr, "forge: progress: %s\n", line)
	}
}

package debugview

import (
	"context"
	"net/http"

	"github.com/0k-lab/agent-forge/pkg/activity"
)

// ActivitySource is the Gate's in-memory live activity; *activity.Store
// implements it. Job returns the recorded stages of a job's live attempts.
type ActivitySource interface {
	Job(jobID string) []activity.Event
}

// Option configures New.
type Option func(*handler)

// WithActivity serves live activity from src on
// GET /v1/debug/jobs/{id}/activity. Without it that route answers with
// "live": false and no activity.
func WithActivity(src ActivitySource) Option {
	return func(h *handler) { h.activity = src }
}

// maxActivity bounds the activity records of one answer (a job has one
// live attempt at a time, each with at most activity.MaxEvents stages).
const maxActivity = 4 * activity.MaxEvents

type activityView struct {
	Attempt   int    `json:"attempt"`
	AttemptID string `json:"attempt_id"`
	WorkerID  string `json:"worker_id"`
	Stage     string `json:"stage"`
	At        string `json:"at"`
}

type activityPage struct {
	Live     bool           `json:"live"`
	Activity []activityView `json:"activity"`
	AsOf     string         `json:"as_of"`
}

// liveActivity answers the activity route from memory; it takes no query
// parameters. Only when the job has no live activity does it ask the
// store whether the job exists: an empty list for a known job, 404 for an
// unknown one.
func (h *handler) liveActivity(ctx context.Context, w http.ResponseWriter, jobID, rawQuery string) {
	if rawQuery != "" {
		writeError(w, http.StatusBadRequest, "invalid_query", "this route takes no query parameters")
		return
	}
	page := activityPage{Live: h.activity != nil, Activity: []activityView{}, AsOf: stamp(h.now())}
	if h.activity != nil {
		for _, e := range h.activity.Job(jobID) {
			if e.JobID != jobID || !e.Stage.Valid() || len(page.Activity) == maxActivity {
				continue
			}
			page.Activity = append(page.Activity, activityView{
				Attempt:   max(e.Ordinal, 0),
				AttemptID: ref(e.AttemptID),
				WorkerID:  lane(e.Lane),
				Stage:     string(e.Stage),
				At:        stamp(e.At),
			})
		}
	}
	if len(page.Activity) == 0 {
		if _, _, err := h.store.DebugJob(ctx, jobID); err != nil {
			writeStoreError(w, err)
			return
		}
	}
	writeJSON(w, page)
}

package githubfake

import (
	"fmt"
	"strconv"
	"time"
)

// Workflow is one scripted GitHub Actions workflow of a repository
// (SetWorkflows): every event it listens to creates one run for the
// event's commit, which is listed Start after the event (queued, then
// in_progress) and completes Duration later with Conclusion. A
// pull_request workflow runs for the head of a pull request when it is
// opened, and not at all when the pull request conflicts with its base,
// as on GitHub; a push workflow runs for every branch a push creates or
// moves, at push time.
type Workflow struct {
	Name       string        `json:"name"`
	Event      string        `json:"event"` // "push" or "pull_request"
	Start      time.Duration `json:"start"`
	Duration   time.Duration `json:"duration"`
	Conclusion string        `json:"conclusion"` // success, failure, skipped, cancelled, …
}

// Bounds of SetWorkflows.
const maxWorkflows = 100

// run is one workflow run of a timed repository.
type run struct {
	id         int64
	name       string
	event      string
	sha        string
	appear     time.Time
	done       time.Time
	conclusion string
}

// timed is the Actions side of a repository with scripted workflows.
type timed struct {
	workflows []Workflow
	runs      []*run
}

// SetWorkflows scripts the workflows of owner/repo; from then on its runs
// follow them (and no longer SetCI's poll-counted modes).
func (a *API) SetWorkflows(owner, repo string, wfs []Workflow) error {
	if len(wfs) == 0 || len(wfs) > maxWorkflows {
		return fmt.Errorf("1 to %d workflows", maxWorkflows)
	}
	for _, w := range wfs {
		if (w.Event != "push" && w.Event != "pull_request") || w.Start < 0 || w.Duration < 0 || w.Conclusion == "" {
			return fmt.Errorf("bad workflow %q", w.Name)
		}
	}
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timed[repoKey(owner, repo)] = &timed{workflows: append([]Workflow(nil), wfs...)}
	return nil
}

// event creates the runs an event of owner/repo for sha starts now.
func (a *API) event(owner, repo, event, sha string) { a.eventAt(owner, repo, event, sha, a.now()) }

// eventAt creates the runs an event of owner/repo for sha started at now.
func (a *API) eventAt(owner, repo, event, sha string, now time.Time) {
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.timed[repoKey(owner, repo)]
	if t == nil {
		return
	}
	for _, w := range t.workflows {
		if w.Event != event {
			continue
		}
		c.nextRun++
		t.runs = append(t.runs, &run{id: 5000 + c.nextRun, name: w.Name, event: event, sha: sha,
			appear: now.Add(w.Start), done: now.Add(w.Start + w.Duration), conclusion: w.Conclusion})
	}
}

// onPush starts the push workflows of every branch a push moved.
func (a *API) onPush(owner, repo string, moved map[string]string) {
	for _, sha := range moved {
		a.event(owner, repo, "push", sha)
	}
}

// timedRuns lists the runs of sha visible now, oldest first; ok is false
// when owner/repo has no scripted workflows.
func (a *API) timedRuns(owner, repo, sha string) ([]map[string]any, bool) {
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.timed[repoKey(owner, repo)]
	if t == nil {
		return nil, false
	}
	now := a.now()
	out := []map[string]any{}
	for _, r := range t.runs {
		if r.sha != sha || now.Before(r.appear) {
			continue
		}
		status, conclusion := "queued", any(nil)
		switch {
		case !now.Before(r.done):
			status, conclusion = "completed", r.conclusion
		case now.After(r.appear):
			status = "in_progress"
		}
		out = append(out, map[string]any{"id": r.id, "name": r.name, "head_sha": r.sha, "status": status,
			"conclusion": conclusion, "event": r.event, "run_attempt": 1, "created_at": stamp(r.appear), "updated_at": stamp(now),
			"html_url": "https://github.com/" + owner + "/" + repo + "/actions/runs/" + strconv.FormatInt(r.id, 10)})
	}
	// GitHub lists the newest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, true
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

const (
	t0 = "2026-11-29T19:20:17.123456Z"
	t1 = "2026-11-29T19:20:17.223456Z"
	t2 = "2026-11-29T19:20:18.000001Z"
)

// fakeGate serves docs/api.md from memory. A text job's input scripts its
// life: "fail" ends failed, "forever" stays pending, "flaky" answers 503 on
// its second poll, "flaky-aggregate" answers 503 to its first aggregate
// request, "stages" stays leased for three polls while its live
// activity moves from analyzing to editing, anything else succeeds after
// one poll in "leased".
type fakeGate struct {
	t     *testing.T
	token string
	srv   *httptest.Server

	mu       sync.Mutex
	jobs     map[string]*fakeJob
	requests []recorded
	// raw, when set for a path, replaces the documented answer.
	raw map[string]func(http.ResponseWriter)
}

type recorded struct {
	method, uri string
	header      http.Header
	body        string
}

type fakeJob struct {
	job      Job
	input    string
	polls    int
	aggs     int // aggregate requests
	attempts []Attempt
	events   []Event
}

func newFakeGate(t *testing.T, token string) *fakeGate {
	t.Helper()
	g := &fakeGate{t: t, token: token, jobs: map[string]*fakeJob{}, raw: map[string]func(http.ResponseWriter){}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", g.submit)
	mux.HandleFunc("GET /v1/jobs/{id}", g.job)
	mux.HandleFunc("GET /v1/jobs/{id}/events", g.events)
	mux.HandleFunc("GET /v1/jobs/{id}/aggregate", g.aggregate)
	mux.HandleFunc("GET /v1/debug/jobs/{id}/activity", g.activity)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 2<<20))
		g.mu.Lock()
		g.requests = append(g.requests, recorded{r.Method, r.RequestURI, r.Header.Clone(), string(body)})
		raw := g.raw[r.URL.Path]
		g.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if r.Header.Get("Authorization") != "Bearer "+g.token {
			writeError(w, http.StatusUnauthorized, "unauthorized", "owner token required")
			return
		}
		if raw != nil {
			raw(w)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (g *fakeGate) setRaw(path string, status int, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.raw[path] = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func (g *fakeGate) submit(w http.ResponseWriter, r *http.Request) {
	var task Task
	if err := strictjson.DecodeReader(r.Body, 1<<20, &task); err != nil || task.Validate() != nil {
		writeError(w, http.StatusBadRequest, "invalid_task", "the task is not valid")
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("j_%04d", len(g.jobs)+1)
	zero := 0
	j := &fakeJob{job: Job{ID: id, Status: "pending", AttemptCount: &zero, CreatedAt: t0, UpdatedAt: t0}}
	if task.Input != nil {
		j.job.Kind, j.input = "text", *task.Input
	} else {
		j.job.Kind, j.job.RepositoryID = "coding", task.RepositoryID
	}
	j.events = []Event{{Seq: 1, Type: "submitted", At: t0}}
	g.jobs[id] = j
	writeJSON(w, http.StatusCreated, j.job)
}

// advance moves a job one step along its script; it runs on each job poll.
func (j *fakeJob) advance() {
	j.polls++
	one, deadline := 1, t2
	switch {
	case j.input == "forever" || terminal(j.job.Status):
		return
	case j.input == "stages" && j.job.Status == "leased" && j.polls < 4:
		return
	case j.job.Status == "pending":
		j.job.Status, j.job.AttemptCount, j.job.UpdatedAt = "leased", &one, t1
		j.attempts = []Attempt{{ID: "a_1", Ordinal: 1, Status: "leased", WorkerID: "worker-1#1", LeasedAt: t1, DeadlineAt: &deadline, Evidence: &[]json.RawMessage{}}}
		j.events = append(j.events, Event{Seq: 2, Type: "leased", At: t1, Attempt: &one})
	case j.job.RepositoryID != nil && strings.HasPrefix(*j.job.RepositoryID, "deliver-"):
		j.deliver()
	case j.input == "fail":
		code, disp := "invalid_task", "terminal"
		j.job.Status, j.job.FailureCode, j.job.UpdatedAt = "failed", &code, t2
		a := &j.attempts[0]
		a.Status, a.CompletedAt, a.Disposition, a.FailureCode = "failed", &deadline, &disp, &code
		j.events = append(j.events, Event{Seq: 3, Type: "attempt_failed", At: t2, Attempt: &one, Code: &code}, Event{Seq: 4, Type: "failed", At: t2, Code: &code})
	default:
		out := strings.ToUpper(j.input)
		empty := []json.RawMessage{}
		j.job.Status, j.job.Result, j.job.UpdatedAt = "succeeded", &out, t2
		a := &j.attempts[0]
		a.Status, a.CompletedAt, a.Evidence = "succeeded", &deadline, &empty
		j.events = append(j.events, Event{Seq: 3, Type: "succeeded", At: t2, Attempt: &one})
	}
}

// deliver scripts a delivered coding job after its lease: delivering in
// push, then ci pending, then merged ("deliver-ok") or failed with
// ci_failed ("deliver-ci-fail").
func (j *fakeJob) deliver() {
	one, deadline := 1, t2
	sha := "0123456789abcdef0123456789abcdef01234567"
	d := j.job.Delivery
	switch {
	case d == nil:
		j.job.Status, j.job.CandidateSHA = "delivering", &sha
		j.job.Delivery = &Delivery{Phase: "push", Branch: "forge/job-" + j.job.ID}
		a := &j.attempts[0]
		a.Status, a.CompletedAt, a.CandidateSHA = "succeeded", &deadline, &sha
		j.events = append(j.events, Event{Seq: 3, Type: "delivering", At: t2, Attempt: &one})
	case d.Phase == "push":
		url, ci := "https://github.com/octo/hello/pull/4", "pending"
		d.Phase, d.PRURL, d.CIState = "ci", &url, &ci
		j.events = append(j.events, Event{Seq: 4, Type: "delivery", At: t2, Code: &d.Phase})
	case *j.job.RepositoryID == "deliver-ok":
		merge, ci := "89abcdef0123456789abcdef0123456789abcdef", "success"
		d.Phase, d.MergeSHA, d.CIState = "merged", &merge, &ci
		j.job.Status = "succeeded"
		j.events = append(j.events, Event{Seq: 5, Type: "succeeded", At: t2})
	default:
		code, ci := "ci_failed", "failure"
		d.Phase, d.FailureCode, d.CIState = "failed", &code, &ci
		j.job.Status, j.job.FailureCode = "failed", &code
		j.events = append(j.events, Event{Seq: 5, Type: "failed", At: t2, Code: &code})
	}
}

func (g *fakeGate) lookup(w http.ResponseWriter, r *http.Request) *fakeJob {
	j := g.jobs[r.PathValue("id")]
	if j == nil {
		writeError(w, http.StatusNotFound, "not_found", "no such job")
	}
	return j
}

func (g *fakeGate) job(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if j := g.lookup(w, r); j != nil {
		j.advance()
		if j.input == "flaky" && j.polls == 2 {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "try again")
			return
		}
		writeJSON(w, http.StatusOK, j.job)
	}
}

func (g *fakeGate) events(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if j := g.lookup(w, r); j != nil {
		writeJSON(w, http.StatusOK, j.events)
	}
}

func (g *fakeGate) aggregate(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if j := g.lookup(w, r); j != nil {
		if j.aggs++; j.input == "flaky-aggregate" && j.aggs == 1 {
			writeError(w, http.StatusServiceUnavailable, "not_ready", "gate is not ready")
			return
		}
		attempts := j.attempts
		if attempts == nil {
			attempts = []Attempt{}
		}
		writeJSON(w, http.StatusOK, Aggregate{Job: j.job, Attempts: attempts, Events: j.events})
	}
}

// activity serves the debug viewer's live activity route.
func (g *fakeGate) activity(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	j := g.lookup(w, r)
	if j == nil {
		return
	}
	acts := []activityRecord{}
	if j.input == "stages" && j.job.Status == "leased" {
		acts = append(acts, activityRecord{Attempt: 1, AttemptID: "a_1", WorkerID: "worker-1#1", Stage: "analyzing", At: t1})
		if j.polls >= 3 {
			acts = append(acts, activityRecord{Attempt: 1, AttemptID: "a_1", WorkerID: "worker-1#1", Stage: "editing", At: t2})
		}
	}
	writeJSON(w, http.StatusOK, activityAnswer{Live: true, Activity: acts, AsOf: t2})
}

func (g *fakeGate) recordedRequests() []recorded {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]recorded(nil), g.requests...)
}

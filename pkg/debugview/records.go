package debugview

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// ErrNotFound is what a Reader returns (possibly wrapped) for an unknown job.
var ErrNotFound = errors.New("debugview: not found")

// Reader is the read-only view of Gate state the viewer needs. pkg/store
// (through the Gate) implements it; tests use a fake. Implementations
// return at most limit records, already ordered.
type Reader interface {
	// DebugJobs lists jobs newest first (submission order, newest at the
	// front), starting strictly after the job with id afterID; "" starts at
	// the newest job and an unknown afterID yields no jobs.
	DebugJobs(ctx context.Context, afterID string, limit int) ([]Job, error)
	// DebugLanes lists Worker lanes ordered by Lane, strictly after the
	// given lane name ("" starts at the first).
	DebugLanes(ctx context.Context, after string, limit int) ([]Lane, error)
	// DebugJob returns one job and its attempts ordered by ordinal, or
	// ErrNotFound.
	DebugJob(ctx context.Context, id string) (Job, []Attempt, error)
	// DebugEvents lists a job's events ordered by Seq, strictly after
	// afterSeq; ErrNotFound for an unknown job.
	DebugEvents(ctx context.Context, jobID string, afterSeq int64, limit int) ([]Event, error)
}

// Job is the diagnostic part of a job. It has no field for the task, the
// result or anything else the viewer must not show.
type Job struct {
	ID           string
	Kind         string // text|coding
	Status       string
	FailureCode  string
	RepositoryID string
	BaseSHA      string
	AttemptCount int
	RetryAt      time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Delivery (docs/delivery.md); empty without one.
	DeliveryPhase  string
	DeliveryBranch string
	PRURL          string
	CIState        string
	MergeSHA       string
}

// Usage is an attempt's model gateway usage: counts only (docs/api.md).
// The viewer shows a job's total as the sum of its attempts'.
type Usage struct {
	Requests, InputTokens, OutputTokens, CachedTokens int64
}

// Attempt is the diagnostic part of one attempt.
type Attempt struct {
	ID          string
	Ordinal     int
	Status      string
	Lane        string // the Worker lane, e.g. worker-1#1
	LeasedAt    time.Time
	DeadlineAt  time.Time
	CompletedAt time.Time
	Disposition string
	FailureCode string
	Usage       *Usage // nil: not metered
}

// Event is one timeline entry: type and time, the attempt ordinal and a
// bounded code where relevant. Event details and error text have no field.
type Event struct {
	Seq     int64
	Type    string
	At      time.Time
	Attempt int
	Code    string
}

// Lane is one Worker connection slot and its connection state.
type Lane struct {
	Lane           string // worker-1, worker-1#1, …
	WorkerID       string
	Pool           string
	Connected      bool
	ConnectedAt    time.Time
	DisconnectedAt time.Time
	JobID          string // current lease, if any
	AttemptID      string
}

// The view types below are exactly what the JSON routes emit; tests pin
// their field sets.

type jobView struct {
	ID           string `json:"id"`
	Kind         string `json:"kind"`
	Status       string `json:"status"`
	FailureCode  string `json:"failure_code,omitempty"`
	RepositoryID string `json:"repository_id,omitempty"`
	BaseSHA      string `json:"base_sha,omitempty"`
	AttemptCount int    `json:"attempt_count"`
	RetryAt      string `json:"retry_at,omitempty"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`

	DeliveryPhase  string `json:"delivery_phase,omitempty"`
	DeliveryBranch string `json:"delivery_branch,omitempty"`
	PRURL          string `json:"pr_url,omitempty"`
	CIState        string `json:"ci_state,omitempty"`
	MergeSHA       string `json:"merge_sha,omitempty"`
}

type usageView struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
}

type attemptView struct {
	ID          string     `json:"id"`
	Ordinal     int        `json:"ordinal"`
	Status      string     `json:"status"`
	WorkerID    string     `json:"worker_id"`
	LeasedAt    string     `json:"leased_at,omitempty"`
	DeadlineAt  string     `json:"deadline_at,omitempty"`
	CompletedAt string     `json:"completed_at,omitempty"`
	Disposition string     `json:"disposition,omitempty"`
	FailureCode string     `json:"failure_code,omitempty"`
	Usage       *usageView `json:"usage,omitempty"`
}

type eventView struct {
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
	At      string `json:"at"`
	Attempt int    `json:"attempt,omitempty"`
	Code    string `json:"code,omitempty"`
}

type laneView struct {
	Lane           string `json:"lane"`
	WorkerID       string `json:"worker_id,omitempty"`
	Pool           string `json:"pool,omitempty"`
	Connected      bool   `json:"connected"`
	ConnectedAt    string `json:"connected_at,omitempty"`
	DisconnectedAt string `json:"disconnected_at,omitempty"`
	JobID          string `json:"job_id,omitempty"`
	AttemptID      string `json:"attempt_id,omitempty"`
}

type jobsPage struct {
	Jobs       []jobView `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
	AsOf       string    `json:"as_of"`
}

type lanesPage struct {
	Lanes      []laneView `json:"lanes"`
	NextCursor string     `json:"next_cursor,omitempty"`
	AsOf       string     `json:"as_of"`
}

type timelinePage struct {
	Job        jobView       `json:"job"`
	Attempts   []attemptView `json:"attempts"`
	Events     []eventView   `json:"events"`
	NextCursor string        `json:"next_cursor,omitempty"`
	AsOf       string        `json:"as_of"`
}

const timeLayout = "2006-01-02T15:04:05.000000Z"

// stamp formats t as RFC 3339 UTC with microseconds; zero is "" (omitted).
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// keep passes s through when valid accepts it and drops it otherwise, so
// free text can never travel in an identifier or code field.
func keep(valid func(string) bool, s string) string {
	if !valid(s) {
		return ""
	}
	return s
}

func code(s string) string { return keep(ident.ValidCode, s) }
func sha(s string) string  { return keep(ident.ValidObjectID, s) }
func ref(s string) string  { return keep(ident.ValidRef, s) }
func id(s string) string   { return keep(ident.ValidID, s) }
func lane(s string) string { return keep(ident.ValidLane, s) }

func viewJob(j Job) jobView {
	return jobView{
		ID:           ref(j.ID),
		Kind:         code(j.Kind),
		Status:       code(j.Status),
		FailureCode:  code(j.FailureCode),
		RepositoryID: id(j.RepositoryID),
		BaseSHA:      sha(j.BaseSHA),
		AttemptCount: max(j.AttemptCount, 0),
		RetryAt:      stamp(j.RetryAt),
		CreatedAt:    stamp(j.CreatedAt),
		UpdatedAt:    stamp(j.UpdatedAt),

		DeliveryPhase:  code(j.DeliveryPhase),
		DeliveryBranch: keep(ident.ValidBranch, j.DeliveryBranch),
		PRURL:          keep(validPRURL, j.PRURL),
		CIState:        code(j.CIState),
		MergeSHA:       sha(j.MergeSHA),
	}
}

// viewUsage passes counts through, negative ones as 0 (nil: none).
func viewUsage(u *Usage) *usageView {
	if u == nil {
		return nil
	}
	return &usageView{Requests: max(u.Requests, 0), InputTokens: max(u.InputTokens, 0), OutputTokens: max(u.OutputTokens, 0), CachedTokens: max(u.CachedTokens, 0)}
}

// validPRURL accepts a github.com pull request URL without credentials,
// query or fragment.
func validPRURL(s string) bool {
	rest, ok := strings.CutPrefix(s, "https://github.com/")
	if !ok || len(s) > 512 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func viewAttempt(a Attempt) attemptView {
	return attemptView{
		ID:          ref(a.ID),
		Ordinal:     a.Ordinal,
		Status:      code(a.Status),
		WorkerID:    lane(a.Lane),
		LeasedAt:    stamp(a.LeasedAt),
		DeadlineAt:  stamp(a.DeadlineAt),
		CompletedAt: stamp(a.CompletedAt),
		Disposition: code(a.Disposition),
		FailureCode: code(a.FailureCode),
		Usage:       viewUsage(a.Usage),
	}
}

func viewEvent(e Event) eventView {
	return eventView{Seq: e.Seq, Type: code(e.Type), At: stamp(e.At), Attempt: max(e.Attempt, 0), Code: code(e.Code)}
}

func viewLane(l Lane) laneView {
	return laneView{
		Lane:           lane(l.Lane),
		WorkerID:       id(l.WorkerID),
		Pool:           id(l.Pool),
		Connected:      l.Connected,
		ConnectedAt:    stamp(l.ConnectedAt),
		DisconnectedAt: stamp(l.DisconnectedAt),
		JobID:          ref(l.JobID),
		AttemptID:      ref(l.AttemptID),
	}
}

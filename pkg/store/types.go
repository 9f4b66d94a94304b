package store

import (
	"encoding/json"
	"time"
)

// Job kinds.
const (
	KindText   = "text"
	KindCoding = "coding"
)

// Job statuses.
const (
	JobPending   = "pending"
	JobLeased    = "leased"
	JobRetryWait = "retry_wait"
	// JobDelivering: the coding candidate succeeded and the Gate is
	// delivering it (pkg/delivery); the job ends after merge or failure.
	JobDelivering = "delivering"
	JobSucceeded  = "succeeded"
	JobFailed     = "failed"
)

// Attempt statuses.
const (
	AttemptLeased    = "leased"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	AttemptExpired   = "expired"
)

// Dispositions of a failed attempt (the wire protocol's values).
const (
	DispositionRetryable = "retryable"
	DispositionTerminal  = "terminal"
)

// Failure codes the store itself writes.
const (
	// CodeMaxAttemptsExceeded is the job failure code once a retryable
	// failure or expiry happens on the last allowed attempt.
	CodeMaxAttemptsExceeded = "max_attempts_exceeded"
	// CodeLeaseExpired is the failure code of an attempt the sweep expired.
	CodeLeaseExpired = "lease_expired"
)

// Event types.
const (
	EventSubmitted      = "submitted"
	EventLeased         = "leased"
	EventExpired        = "expired"
	EventAttemptFailed  = "attempt_failed"
	EventRetryScheduled = "retry_scheduled"
	EventDelivering     = "delivering" // the coding attempt succeeded; delivery starts (attempt set)
	EventDelivery       = "delivery"   // a delivery phase was entered (code: the phase)
	EventSucceeded      = "succeeded"
	EventFailed         = "failed"
	// EventReleased: a lease the Worker never started went back to the
	// queue; its attempt was removed and did not count.
	EventReleased = "released"
)

// Limits enforced on input.
const (
	MaxTaskBytes        = 1 << 20  // task JSON
	MaxOutputBytes      = 1 << 20  // text result
	MaxAgentReportBytes = 64 << 10 // agent report JSON
	MaxListPlugins      = 64       // plugin ids in one Lease call
	MaxListRepositories = 1024     // repository ids in one Lease call
)

// TimeFormat is how every timestamp is rendered: RFC 3339, UTC, exactly
// six fractional digits. Stored values have microsecond precision.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Time is a stored timestamp (UTC, microsecond precision) that marshals as
// TimeFormat in JSON.
type Time struct{ time.Time }

// MarshalJSON renders t as a TimeFormat string.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeFormat) + `"`), nil
}

// MarshalText renders t as TimeFormat.
func (t Time) MarshalText() ([]byte, error) { return []byte(t.UTC().Format(TimeFormat)), nil }

func fromMicros(us int64) Time { return Time{time.UnixMicro(us).UTC()} }

func fromMicrosPtr(us *int64) *Time {
	if us == nil {
		return nil
	}
	t := fromMicros(*us)
	return &t
}

// NewJob is a validated submission. Gate builds Task (canonical task JSON
// object) and Policy (policy.Policy.Canonical()); the store derives the
// plugin id, lease TTL, retry base and max attempts from Policy, so they
// can never disagree with the persisted document.
type NewJob struct {
	ID           string // 1..64 of [A-Za-z0-9_-]
	Kind         string // KindText or KindCoding
	Task         []byte
	Pool         string // worker pool (safe id)
	RepositoryID string // coding jobs only (safe id)
	// DefaultBranch is the repository's default branch as resolved at
	// submit (coding jobs only, optional): every lease of the job carries
	// it, whatever the configuration says later.
	DefaultBranch string
	// PreparedPath is the bare repository Gate prepared for a public-source
	// coding job at submit ("" for static registrations). It stays in the
	// Gate: a lease carries only the base, and the Gate serves the base
	// from, and stores the candidate into, this repository.
	PreparedPath string
	// BaseSHA and TestArgCounts, for a coding job, are the task's
	// base_sha and the argv length of each of its tests, in order, as
	// the Gate decoded them at submit; evidence is checked against them.
	BaseSHA       string
	TestArgCounts []int
	Policy        []byte
	// Delivery, for a coding job, names the GitHub repository and base
	// branch the candidate is delivered to; nil: candidate-only.
	Delivery *DeliveryTarget
}

// DeliveryTarget is where a coding job's candidate is delivered.
type DeliveryTarget struct {
	Owner, Repo, BaseBranch string
}

// Job is the owner API's job object (docs/api.md); absent values are
// omitted from JSON.
type Job struct {
	ID           string        `json:"id"`
	Kind         string        `json:"kind"`
	Status       string        `json:"status"`
	FailureCode  string        `json:"failure_code,omitempty"`
	Result       *string       `json:"result,omitempty"`
	CandidateSHA string        `json:"candidate_sha,omitempty"`
	RepositoryID string        `json:"repository_id,omitempty"`
	AttemptCount int           `json:"attempt_count"`
	RetryAt      *Time         `json:"retry_at,omitempty"`
	Delivery     *DeliveryView `json:"delivery,omitempty"`
	// Usage is the sum of the attempts' metered usage (Job and
	// Aggregate; absent when no attempt was metered).
	Usage     *Usage `json:"usage,omitempty"`
	CreatedAt Time   `json:"created_at"`
	UpdatedAt Time   `json:"updated_at"`

	Pool          string `json:"-"`
	PluginID      string `json:"-"`
	BaseSHA       string `json:"-"` // coding jobs: the task's base_sha
	TestArgCounts []int  `json:"-"` // coding jobs: the argv length of each test, in order
}

// Event is one timeline entry. Seq numbers a job's events from 1.
type Event struct {
	Seq     int    `json:"seq"`
	Type    string `json:"type"`
	At      Time   `json:"at"`
	Attempt int    `json:"attempt,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Attempt is one lease of a job, as rendered in the aggregate.
type Attempt struct {
	ID           string          `json:"id"`
	Ordinal      int             `json:"ordinal"`
	Status       string          `json:"status"`
	WorkerID     string          `json:"worker_id"`
	LeasedAt     Time            `json:"leased_at"`
	DeadlineAt   Time            `json:"deadline_at"`
	CompletedAt  *Time           `json:"completed_at,omitempty"`
	Disposition  string          `json:"disposition,omitempty"`
	FailureCode  string          `json:"failure_code,omitempty"`
	CandidateSHA string          `json:"candidate_sha,omitempty"`
	AgentReport  json.RawMessage `json:"agent_report,omitempty"`
	// Usage is what the attempt spent through its Worker's model
	// gateway; absent when it was not metered (see Usage).
	Usage    *Usage            `json:"usage,omitempty"`
	Evidence []json.RawMessage `json:"evidence"`
}

// Usage is an attempt's model gateway usage as its Worker reported it
// with the result: requests forwarded, input tokens (the cached ones
// included), output tokens and the cached part of the input. An attempt
// has none (nil) when it was not metered: a result from a Worker without
// a gateway or from before usage existed, or no result at all (expired,
// lost lease).
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
}

// MaxUsage bounds each count of a Usage.
const MaxUsage = 1 << 53

// capped is u with each count at most MaxUsage.
func (u Usage) capped() Usage {
	return Usage{min(u.Requests, MaxUsage), min(u.InputTokens, MaxUsage), min(u.OutputTokens, MaxUsage), min(u.CachedTokens, MaxUsage)}
}

func (u Usage) valid() bool {
	for _, v := range []int64{u.Requests, u.InputTokens, u.OutputTokens, u.CachedTokens} {
		if v < 0 || v > MaxUsage {
			return false
		}
	}
	return true
}

// Budget is what one attempt may spend (Lease): nil limits are
// unbounded, 0 means nothing is left.
type Budget struct {
	MaxTokens   *int64
	MaxRequests *int64
}

// Aggregate is a job with its ordered attempts (evidence nested) and
// ordered events.
type Aggregate struct {
	Job      Job       `json:"job"`
	Attempts []Attempt `json:"attempts"`
	Events   []Event   `json:"events"`
}

// Lease is what Lease hands to a lane: everything the wire lease message
// needs. Policy is the attempt's copy of the job's canonical policy bytes.
type Lease struct {
	JobID        string
	AttemptID    string
	Ordinal      int
	Kind         string
	Task         json.RawMessage
	Policy       json.RawMessage
	RepositoryID string
	// DefaultBranch is the one resolved when the job was submitted ("" if
	// none).
	DefaultBranch string
	// PreparedPath is the public-source repository prepared at submit (""
	// if none).
	PreparedPath string
	// BaseSHA is a coding job's base commit as submitted ("" for text).
	BaseSHA    string
	PluginID   string
	LeasedAt   time.Time
	DeadlineAt time.Time
	// Budget is the attempt's model budget (nil: the policy has none):
	// the policy's per-attempt limits, lowered to what the job's earlier
	// attempts left of its per-job limits.
	Budget *Budget
}

// Fence identifies who is writing for an attempt: the job and attempt the
// Worker names plus the lane and generation of the connection it used.
type Fence struct {
	JobID      string
	AttemptID  string
	Lane       string
	Generation string
}

// Outcome is an attempt's result. Success: Output for text jobs (may be
// empty), CandidateSHA (40 lowercase hex) and optional AgentReport (a JSON
// object) for coding jobs. Failure: Disposition (retryable|terminal) and
// FailureCode (a lowercase code such as execution_failed).
type Outcome struct {
	Succeeded    bool
	Output       *string
	CandidateSHA string
	AgentReport  json.RawMessage
	Disposition  string
	FailureCode  string
	// Usage is the attempt's gateway usage (nil: not metered).
	Usage *Usage
}

// Completion reports what Complete did. Replayed is true when the same
// outcome had already been recorded and nothing was written.
type Completion struct {
	JobStatus string
	RetryAt   time.Time // set when JobStatus is JobRetryWait
	Replayed  bool
}

// Expiry is one attempt the sweep expired.
type Expiry struct {
	JobID      string
	AttemptID  string
	Ordinal    int
	Lane       string
	Generation string
	JobStatus  string    // JobRetryWait or JobFailed
	RetryAt    time.Time // set when JobStatus is JobRetryWait
}

// SweepResult reports a sweep: the attempts it expired and the next time
// something becomes due (the earliest leased deadline or retry_at), so the
// dispatcher can arm a timer. HasNext is false when nothing is pending.
type SweepResult struct {
	Expired []Expiry
	NextDue time.Time
	HasNext bool
}

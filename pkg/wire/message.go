package wire

import (
	"encoding/json"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
)

// Protocol is the value of hello.protocol for this version.
const Protocol = "forge-wire/v1"

// Path is the Gate route a Worker lane dials.
const Path = "/v1/worker/connect"

// Bounds of the protocol. Sizes count bytes. The identifier bounds (ids, refs,
// slots, generations, evidence) are package ident's.
const (
	MaxMessageBytes = 1 << 20 // one encoded Envelope (one WebSocket frame payload)
	MaxHelloPlugins = 64      // plugin ids in hello
	MaxHelloRepos   = 1024    // repository ids in hello
)

// Type names an Envelope's payload.
type Type string

// Message types. Worker → Gate: Hello, Heartbeat, Evidence, Result,
// Activity, Idle, Goodbye. Gate → Worker: Welcome, Lease, Ack, Reject,
// Cancel.
const (
	TypeHello     Type = "hello"
	TypeWelcome   Type = "welcome"
	TypeLease     Type = "lease"
	TypeHeartbeat Type = "heartbeat"
	TypeEvidence  Type = "evidence"
	TypeResult    Type = "result"
	TypeAck       Type = "ack"
	TypeReject    Type = "reject"
	TypeCancel    Type = "cancel"
	TypeActivity  Type = "activity"
	TypeIdle      Type = "idle"
	TypeGoodbye   Type = "goodbye"
)

// Envelope is one WebSocket message: {"type":t,"seq":n,t:{…}}. Exactly one
// payload pointer is set and it matches Type. Seq is zero (absent) except on
// heartbeat, evidence, result, goodbye and their ack or reject (never on
// activity or idle).
type Envelope struct {
	Type      Type       `json:"type"`
	Seq       uint64     `json:"seq,omitempty"`
	Hello     *Hello     `json:"hello,omitempty"`
	Welcome   *Welcome   `json:"welcome,omitempty"`
	Lease     *Lease     `json:"lease,omitempty"`
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	Evidence  *Evidence  `json:"evidence,omitempty"`
	Result    *Result    `json:"result,omitempty"`
	Ack       *Ack       `json:"ack,omitempty"`
	Reject    *Reject    `json:"reject,omitempty"`
	Cancel    *Cancel    `json:"cancel,omitempty"`
	Activity  *Activity  `json:"activity,omitempty"`
	Idle      *Idle      `json:"idle,omitempty"`
	Goodbye   *Goodbye   `json:"goodbye,omitempty"`
}

// Hello is a lane's first message: who it is and what it can run.
type Hello struct {
	Protocol     string   `json:"protocol"`
	WorkerID     string   `json:"worker_id"`
	Slot         int      `json:"slot"`
	Plugins      []string `json:"plugins"`
	Repositories []string `json:"repositories"`
	// ActivityVersions offers live-activity versions (optional; at most
	// activity.MaxOffer distinct names). Gate selects one it knows in each
	// lease, or none.
	ActivityVersions []string `json:"activity_versions,omitempty"`
	// UsageVersions offers gateway usage versions (optional; the same
	// bounds as ActivityVersions): a Worker that serves a model gateway
	// offers UsageV1.
	UsageVersions []string `json:"usage_versions,omitempty"`
}

// Welcome accepts a hello. Lane is the server-side lane name (worker-1,
// worker-1#1, …); Generation is this connection's fencing token.
type Welcome struct {
	Lane       string `json:"lane"`
	Generation string `json:"generation"`
}

// Kind is a job kind.
type Kind string

// Job kinds.
const (
	KindText   Kind = "text"
	KindCoding Kind = "coding"
)

// Lease hands one attempt to an idle lane. Policy is the job's canonical
// resolved policy document, byte for byte; Task is the submitted task
// (TextTask or CodingTask by Kind).
type Lease struct {
	JobID      string          `json:"job_id"`
	AttemptID  string          `json:"attempt_id"`
	Ordinal    int             `json:"ordinal"`
	DeadlineAt time.Time       `json:"deadline_at"`
	Kind       Kind            `json:"kind"`
	Policy     json.RawMessage `json:"policy"`
	Task       json.RawMessage `json:"task"`
	// DefaultBranch is the repository's default branch as Gate knows it
	// (coding leases only; optional). The Worker requires it to equal the
	// registered repository's HEAD branch and the base to be its ancestor.
	DefaultBranch string `json:"default_branch,omitempty"`
	// BaseSHA is set on coding leases of a public-source repository only:
	// the base the Gate checked on its prepared repository at submit (the
	// task's base_sha). It names no path: the Worker fetches exactly this
	// commit from the Gate (SourcePath) into its own cache and returns the
	// candidate as a bundle (CandidatePath), DECISIONS 15.
	BaseSHA string `json:"base_sha,omitempty"`
	// ActivityVersion is the live-activity version Gate selected from the
	// lane's offer; empty disables activity for this attempt. The decoder
	// checks only its shape: a Worker refuses a version it does not know
	// before executing anything (failure invalid_activity).
	ActivityVersion string `json:"activity_version,omitempty"`
	// Activity must be absent: activity belongs only to activity messages.
	// It is decoded, not rejected by the decoder, so that a Worker can fail
	// such a lease with invalid_activity instead of dropping the connection.
	Activity json.RawMessage `json:"activity,omitempty"`
	// UsageVersion is the gateway usage version Gate selected from the
	// lane's offer (UsageV1 or empty). With it the Worker returns the
	// attempt's usage, and Budget (only with it) bounds the attempt.
	UsageVersion string  `json:"usage_version,omitempty"`
	Budget       *Budget `json:"budget,omitempty"`
}

// Activity is one live-activity stage of the lane's current attempt
// (Worker → Gate, no seq, never answered). Gate records it only for the
// exact job, attempt, lane and connection of the lease, with the selected
// version; anything else is dropped.
type Activity = activity.Payload

// Heartbeat asks the Gate to extend the lease of the named attempt.
type Heartbeat struct {
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
	// Usage is what the attempt spent through the gateway so far (only
	// on a lease that selected UsageV1: Gate records it, so that an
	// attempt that never returns a result still counts).
	Usage *Usage `json:"usage,omitempty"`
}

// Evidence binds one batch of evidence records to the named attempt. Batch 1
// carries the work's records, batch 2 an optional cleanup record. The record
// schema belongs to the evidence contract; here each record is a JSON object.
type Evidence struct {
	JobID     string            `json:"job_id"`
	AttemptID string            `json:"attempt_id"`
	Batch     int               `json:"batch"`
	Records   []json.RawMessage `json:"records"`
}

// Outcome is how an attempt ended.
type Outcome string

// Outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
)

// Disposition says whether a failed attempt may be retried.
type Disposition string

// Dispositions.
const (
	DispositionRetryable Disposition = "retryable"
	DispositionTerminal  Disposition = "terminal"
)

// Result ends an attempt. On success a text attempt sets Output and a
// coding attempt sets CandidateSHA (and optionally AgentReport); on failure
// Disposition and FailureCode are set and nothing else.
type Result struct {
	JobID        string       `json:"job_id"`
	AttemptID    string       `json:"attempt_id"`
	Outcome      Outcome      `json:"outcome"`
	Output       *string      `json:"output,omitempty"`
	CandidateSHA string       `json:"candidate_sha,omitempty"`
	AgentReport  *AgentReport `json:"agent_report,omitempty"`
	Disposition  Disposition  `json:"disposition,omitempty"`
	FailureCode  string       `json:"failure_code,omitempty"`
	// Usage is what the attempt spent through the Worker's model gateway
	// (only on leases that selected a usage version; absent: not metered).
	Usage *Usage `json:"usage,omitempty"`
}

// AgentReport is a coding plugin's self-reported summary. It is a claim,
// never evidence.
type AgentReport struct {
	Summary string   `json:"summary"`
	Changes []string `json:"changes"`
}

// Ack accepts a request. DeadlineAt is set on heartbeat acks only.
type Ack struct {
	DeadlineAt time.Time `json:"deadline_at,omitzero"`
}

// RejectCode says why the Gate refused a request.
type RejectCode string

// Reject codes.
const (
	// RejectStale: the attempt is not bound to this lane and generation
	// (superseded connection, other lane, unknown or finished attempt).
	RejectStale RejectCode = "stale"
	// RejectExpired: the attempt's deadline has passed.
	RejectExpired RejectCode = "expired"
	// RejectConflict: a different result or evidence batch was already
	// recorded for this attempt.
	RejectConflict RejectCode = "conflict"
	// RejectInvalid: well-formed but unusable (wrong kind of result, a
	// hello for a slot or worker the token does not own, …).
	RejectInvalid RejectCode = "invalid"
	// RejectUnavailable: the Gate could not record the request; retry later.
	RejectUnavailable RejectCode = "unavailable"
)

// Reject refuses a request (Seq set) or the whole connection (Seq zero).
type Reject struct {
	Code RejectCode `json:"code"`
}

// CancelReason says why a lease was withdrawn.
type CancelReason string

// Cancel reasons: one, the sweep expired the lease. A takeover sends no
// cancel: it closes the superseded connection, which a Worker lane already
// treats as the loss of what it runs.
const (
	CancelExpired CancelReason = "expired"
)

// Idle tells the Gate that the named attempt, whose lease the lane lost
// (cancel, a refused heartbeat or evidence batch), has stopped on the
// Worker without a result: the lane may be leased again. No seq, never
// answered.
type Idle struct {
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
}

// Goodbye says the lane is stopping: the Gate must lease it nothing more.
// JobID and AttemptID (both or neither) name the attempt the lane is
// executing; any other attempt leased to the lane was not started and the
// Gate returns it to the queue without consuming an attempt, unless the
// lane heartbeated it or sent evidence or activity for it (it was started). Its ack
// means no lease will follow and nothing unstarted is left leased to the
// lane; a repeated goodbye is ACKed and changes nothing.
type Goodbye struct {
	JobID     string `json:"job_id,omitempty"`
	AttemptID string `json:"attempt_id,omitempty"`
}

// Cancel tells a lane its lease is gone: stop the attempt, then send idle.
type Cancel struct {
	JobID     string       `json:"job_id"`
	AttemptID string       `json:"attempt_id"`
	Reason    CancelReason `json:"reason"`
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// The types below mirror docs/api.md. Optional fields are pointers so that a
// decoded response re-encodes exactly as the Gate sent it: absent stays
// absent, present stays present.

// Job is the job object.
type Job struct {
	ID           string    `json:"id"`
	Kind         string    `json:"kind"`
	Status       string    `json:"status"`
	FailureCode  *string   `json:"failure_code,omitempty"`
	Result       *string   `json:"result,omitempty"`
	CandidateSHA *string   `json:"candidate_sha,omitempty"`
	RepositoryID *string   `json:"repository_id,omitempty"`
	AttemptCount *int      `json:"attempt_count,omitempty"`
	RetryAt      *string   `json:"retry_at,omitempty"`
	Delivery     *Delivery `json:"delivery,omitempty"`
	Usage        *Usage    `json:"usage,omitempty"`
	CreatedAt    string    `json:"created_at"`
	UpdatedAt    string    `json:"updated_at"`
}

// Usage is model gateway usage: an attempt's, or the sum of a job's
// metered attempts. Absent: not metered.
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
}

// maxUsage bounds each usage count (the Gate's bound).
const maxUsage = 1 << 53

// Validate checks a usage object.
func (u *Usage) Validate(path string) error {
	for _, c := range []struct {
		name string
		v    int64
	}{{"requests", u.Requests}, {"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens}, {"cached_tokens", u.CachedTokens}} {
		if c.v < 0 || c.v > maxUsage {
			return fieldErr(path + "/" + c.name)
		}
	}
	return nil
}

// Delivery is a coding job's automatic delivery (docs/delivery.md).
type Delivery struct {
	Phase       string  `json:"phase"`
	Branch      string  `json:"branch"`
	PRURL       *string `json:"pr_url,omitempty"`
	CIState     *string `json:"ci_state,omitempty"`
	MergeSHA    *string `json:"merge_sha,omitempty"`
	FailureCode *string `json:"failure_code,omitempty"`
}

func validDeliveryPhase(s string) bool {
	switch s {
	case "push", "pull_request", "ci", "review", "merge", "merged", "failed":
		return true
	}
	return false
}

func validCIState(s string) bool {
	switch s {
	case "waiting", "pending", "success", "failure", "no_runs":
		return true
	}
	return false
}

// maxURLBytes bounds a pull request URL.
const maxURLBytes = 512

// Validate checks a delivery object.
func (d *Delivery) Validate(path string) error {
	switch {
	case !validDeliveryPhase(d.Phase):
		return fieldErr(path + "/phase")
	case !ident.ValidBranch(d.Branch):
		return fieldErr(path + "/branch")
	case d.PRURL != nil && (!strings.HasPrefix(*d.PRURL, "https://github.com/") || len(*d.PRURL) > maxURLBytes ||
		strings.ContainsAny(*d.PRURL, "@?# \t\n")):
		return fieldErr(path + "/pr_url")
	case d.CIState != nil && !validCIState(*d.CIState):
		return fieldErr(path + "/ci_state")
	case !optSHA(d.MergeSHA) || (d.MergeSHA == nil) == (d.Phase == "merged"):
		return fieldErr(path + "/merge_sha")
	case !optCode(d.FailureCode) || (d.FailureCode == nil) == (d.Phase == "failed"):
		return fieldErr(path + "/failure_code")
	}
	return nil
}

// Event is one entry of a job's ordered event list.
type Event struct {
	Seq     int64   `json:"seq"`
	Type    string  `json:"type"`
	At      string  `json:"at"`
	Attempt *int    `json:"attempt,omitempty"`
	Code    *string `json:"code,omitempty"`
}

// AgentReport is an attempt's self-reported, advisory agent report.
type AgentReport struct {
	SelfReported bool     `json:"self_reported"`
	Summary      string   `json:"summary"`
	Changes      []string `json:"changes"`
}

// Attempt is one lease of a job. Evidence records are passed through as
// JSON objects; docs/api.md does not fix their fields yet.
type Attempt struct {
	ID           string             `json:"id"`
	Ordinal      int                `json:"ordinal"`
	Status       string             `json:"status"`
	WorkerID     string             `json:"worker_id"`
	LeasedAt     string             `json:"leased_at"`
	DeadlineAt   *string            `json:"deadline_at,omitempty"`
	CompletedAt  *string            `json:"completed_at,omitempty"`
	Disposition  *string            `json:"disposition,omitempty"`
	FailureCode  *string            `json:"failure_code,omitempty"`
	CandidateSHA *string            `json:"candidate_sha,omitempty"`
	AgentReport  *AgentReport       `json:"agent_report,omitempty"`
	Usage        *Usage             `json:"usage,omitempty"`
	Evidence     *[]json.RawMessage `json:"evidence"`
}

// Aggregate is a job with its ordered attempts and events.
type Aggregate struct {
	Job      Job       `json:"job"`
	Attempts []Attempt `json:"attempts"`
	Events   []Event   `json:"events"`
}

const (
	statusSucceeded  = "succeeded"
	statusDelivering = "delivering"
	statusFailed     = "failed"
)

func terminal(status string) bool { return status == statusSucceeded || status == statusFailed }

// checkJobID accepts a job id (ident.ValidRef); the id goes into a URL
// path, so nothing else is allowed.
func checkJobID(id string) error {
	if id == "" || len(id) > ident.MaxRefBytes {
		return fmt.Errorf("must be 1..%d bytes", ident.MaxRefBytes)
	}
	if !ident.ValidRef(id) {
		return errors.New("may contain only A-Z a-z 0-9 _ -")
	}
	return nil
}

func validTime(s string) bool {
	if !strings.HasSuffix(s, "Z") || len(s) > 40 {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// fieldErr names the offending field, never its value.
func fieldErr(path string) error { return fmt.Errorf("%s is missing or invalid", path) }

func optCode(p *string) bool { return p == nil || ident.ValidCode(*p) }
func optTime(p *string) bool { return p == nil || validTime(*p) }
func optSHA(p *string) bool  { return p == nil || ident.ValidObjectID(*p) }

// Validate checks a job object against docs/api.md.
func (j *Job) Validate() error {
	switch {
	case checkJobID(j.ID) != nil:
		return fieldErr("id")
	case j.Kind != "text" && j.Kind != "coding":
		return fieldErr("kind")
	case !validJobStatus(j.Status):
		return fieldErr("status")
	case !optCode(j.FailureCode):
		return fieldErr("failure_code")
	case j.Result != nil && j.Kind != "text":
		return fieldErr("result")
	case !optSHA(j.CandidateSHA) || (j.CandidateSHA != nil && j.Kind != "coding"):
		return fieldErr("candidate_sha")
	case j.RepositoryID != nil && !ident.ValidID(*j.RepositoryID):
		return fieldErr("repository_id")
	case j.AttemptCount == nil || *j.AttemptCount < 0:
		return fieldErr("attempt_count")
	case !optTime(j.RetryAt):
		return fieldErr("retry_at")
	case j.Delivery != nil && j.Kind != "coding":
		return fieldErr("delivery")
	case j.Delivery != nil && j.Delivery.Validate("delivery") != nil:
		return j.Delivery.Validate("delivery")
	case j.Status == statusDelivering && j.Delivery == nil:
		return fieldErr("delivery")
	case j.Usage != nil && j.Usage.Validate("usage") != nil:
		return j.Usage.Validate("usage")
	case !validTime(j.CreatedAt):
		return fieldErr("created_at")
	case !validTime(j.UpdatedAt):
		return fieldErr("updated_at")
	}
	return nil
}

func validJobStatus(s string) bool {
	switch s {
	case "pending", "leased", "retry_wait", statusDelivering, statusSucceeded, statusFailed:
		return true
	}
	return false
}

// The closed value sets of docs/api.md.
func validEventType(s string) bool {
	switch s {
	case "submitted", "leased", "released", "expired", "attempt_failed", "retry_scheduled", "delivering", "delivery",
		statusSucceeded, statusFailed:
		return true
	}
	return false
}

func validAttemptStatus(s string) bool {
	switch s {
	case "leased", statusSucceeded, statusFailed, "expired":
		return true
	}
	return false
}

func optDisposition(p *string) bool { return p == nil || *p == "retryable" || *p == "terminal" }

// Validate checks one event.
func (e *Event) Validate(path string) error {
	switch {
	case e.Seq < 1:
		return fieldErr(path + "/seq")
	case !validEventType(e.Type):
		return fieldErr(path + "/type")
	case !validTime(e.At):
		return fieldErr(path + "/at")
	case e.Attempt != nil && *e.Attempt < 1:
		return fieldErr(path + "/attempt")
	case !optCode(e.Code):
		return fieldErr(path + "/code")
	}
	return nil
}

// validateEvents checks every event and that seq strictly increases.
func validateEvents(events []Event, path string) error {
	if events == nil {
		return fieldErr(path)
	}
	for i := range events {
		p := fmt.Sprintf("%s/%d", path, i)
		if err := events[i].Validate(p); err != nil {
			return err
		}
		if i > 0 && events[i].Seq <= events[i-1].Seq {
			return fmt.Errorf("%s is out of order", p)
		}
	}
	return nil
}

// Validate checks one attempt.
func (a *Attempt) Validate(path string) error {
	switch {
	case !ident.ValidRef(a.ID):
		return fieldErr(path + "/id")
	case a.Ordinal < 1:
		return fieldErr(path + "/ordinal")
	case !validAttemptStatus(a.Status):
		return fieldErr(path + "/status")
	case !ident.ValidLane(a.WorkerID):
		return fieldErr(path + "/worker_id")
	case !validTime(a.LeasedAt):
		return fieldErr(path + "/leased_at")
	case !optTime(a.DeadlineAt):
		return fieldErr(path + "/deadline_at")
	case !optTime(a.CompletedAt):
		return fieldErr(path + "/completed_at")
	case !optDisposition(a.Disposition):
		return fieldErr(path + "/disposition")
	case !optCode(a.FailureCode):
		return fieldErr(path + "/failure_code")
	case !optSHA(a.CandidateSHA):
		return fieldErr(path + "/candidate_sha")
	}
	if r := a.AgentReport; r != nil && (r.Summary == "" || len(r.Changes) == 0) {
		return fieldErr(path + "/agent_report")
	}
	if a.Usage != nil {
		if err := a.Usage.Validate(path + "/usage"); err != nil {
			return err
		}
	}
	if a.Evidence == nil {
		return fieldErr(path + "/evidence")
	}
	for i, rec := range *a.Evidence {
		if len(rec) == 0 || rec[0] != '{' {
			return fieldErr(fmt.Sprintf("%s/evidence/%d", path, i))
		}
	}
	return nil
}

// Validate checks the aggregate: the job, attempts ordered by ordinal and
// events ordered by seq.
func (g *Aggregate) Validate() error {
	if err := g.Job.Validate(); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	if g.Attempts == nil {
		return fieldErr("attempts")
	}
	for i := range g.Attempts {
		p := fmt.Sprintf("attempts/%d", i)
		if err := g.Attempts[i].Validate(p); err != nil {
			return err
		}
		if i > 0 && g.Attempts[i].Ordinal <= g.Attempts[i-1].Ordinal {
			return fmt.Errorf("%s is out of order", p)
		}
	}
	return validateEvents(g.Events, "events")
}

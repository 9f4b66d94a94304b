package wire

import (
	"bytes"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Validate checks that exactly one payload is set, that it matches Type,
// that Seq follows the per-type rule, and that the payload is valid.
func (e *Envelope) Validate() error {
	set := 0
	for _, p := range []bool{e.Hello != nil, e.Welcome != nil, e.Lease != nil, e.Heartbeat != nil,
		e.Evidence != nil, e.Result != nil, e.Ack != nil, e.Reject != nil, e.Cancel != nil, e.Activity != nil,
		e.Idle != nil, e.Goodbye != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return fieldErr("type", "exactly one payload, named by type, is required")
	}
	var err error
	needSeq, mayHaveSeq := false, false
	switch e.Type {
	case TypeHello:
		err = ifSet(e.Hello != nil, func() error { return e.Hello.Validate() })
	case TypeWelcome:
		err = ifSet(e.Welcome != nil, func() error { return e.Welcome.Validate() })
	case TypeLease:
		err = ifSet(e.Lease != nil, func() error { return e.Lease.Validate() })
	case TypeHeartbeat:
		needSeq = true
		err = ifSet(e.Heartbeat != nil, func() error { return e.Heartbeat.Validate() })
	case TypeEvidence:
		needSeq = true
		err = ifSet(e.Evidence != nil, func() error { return e.Evidence.Validate() })
	case TypeResult:
		needSeq = true
		err = ifSet(e.Result != nil, func() error { return e.Result.Validate() })
	case TypeAck:
		needSeq = true
		err = ifSet(e.Ack != nil, func() error { return nil })
	case TypeReject:
		mayHaveSeq = true
		err = ifSet(e.Reject != nil, func() error { return e.Reject.Validate() })
	case TypeCancel:
		err = ifSet(e.Cancel != nil, func() error { return e.Cancel.Validate() })
	case TypeActivity:
		err = ifSet(e.Activity != nil, func() error {
			if e.Activity.Validate() != nil {
				return fieldErr("activity", "must name a job, an attempt, a known version and a stage")
			}
			return nil
		})
	case TypeIdle:
		err = ifSet(e.Idle != nil, func() error { return validateRefs("idle", e.Idle.JobID, e.Idle.AttemptID) })
	case TypeGoodbye:
		needSeq = true
		err = ifSet(e.Goodbye != nil, func() error {
			if e.Goodbye.JobID == "" && e.Goodbye.AttemptID == "" {
				return nil
			}
			return validateRefs("goodbye", e.Goodbye.JobID, e.Goodbye.AttemptID)
		})
	default:
		return fieldErr("type", "unknown message type")
	}
	if err != nil {
		return err
	}
	if needSeq && e.Seq == 0 {
		return fieldErr("seq", "required for this type")
	}
	if !needSeq && !mayHaveSeq && e.Seq != 0 {
		return fieldErr("seq", "not allowed for this type")
	}
	return nil
}

func ifSet(ok bool, f func() error) error {
	if !ok {
		return fieldErr("type", "payload does not match type")
	}
	return f()
}

// Validate checks a hello.
func (h *Hello) Validate() error {
	if h.Protocol != Protocol {
		return fieldErr("hello.protocol", "unsupported protocol")
	}
	if !ident.ValidID(h.WorkerID) {
		return fieldErr("hello.worker_id", "must be a safe id")
	}
	if h.Slot < 0 || h.Slot > ident.MaxSlot {
		return fieldErr("hello.slot", "out of range")
	}
	if err := uniqueIDs(h.Plugins, MaxHelloPlugins, "hello.plugins"); err != nil {
		return err
	}
	if activity.ValidOffer(h.ActivityVersions) != nil {
		return fieldErr("hello.activity_versions", "at most 8 distinct version names")
	}
	if !validUsageOffer(h.UsageVersions) {
		return fieldErr("hello.usage_versions", "at most 8 distinct version names")
	}
	return uniqueIDs(h.Repositories, MaxHelloRepos, "hello.repositories")
}

func uniqueIDs(ids []string, limit int, field string) error {
	if len(ids) > limit {
		return fieldErr(field, "too many entries")
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if !ident.ValidID(id) {
			return fieldErr(field, "entries must be safe ids")
		}
		if _, dup := seen[id]; dup {
			return fieldErr(field, "duplicate entry")
		}
		seen[id] = struct{}{}
	}
	return nil
}

// Validate checks a welcome.
func (w *Welcome) Validate() error {
	if !ident.ValidLane(w.Lane) {
		return fieldErr("welcome.lane", "must be a lane name")
	}
	if !ident.ValidHexID(w.Generation) {
		return fieldErr("welcome.generation", "must be 32 lowercase hex digits")
	}
	return nil
}

func validateRefs(prefix, job, attempt string) error {
	if !ident.ValidRef(job) {
		return fieldErr(prefix+".job_id", "must be a safe id")
	}
	if !ident.ValidRef(attempt) {
		return fieldErr(prefix+".attempt_id", "must be a safe id")
	}
	return nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// Validate checks a lease, including its task against its kind.
func (l *Lease) Validate() error {
	if err := l.validateFields(); err != nil {
		return err
	}
	var err error
	if l.Kind == KindText {
		_, err = DecodeTextTask(l.Task)
	} else {
		_, err = DecodeCodingTask(l.Task)
	}
	if err != nil {
		return fieldErr("lease.task", "does not fit its kind")
	}
	return nil
}

// validateFields is Validate without decoding the task against its kind
// (EncodeLease's checks: Gate sends tasks it validated at submission).
func (l *Lease) validateFields() error {
	if err := validateRefs("lease", l.JobID, l.AttemptID); err != nil {
		return err
	}
	if l.Ordinal < 1 {
		return fieldErr("lease.ordinal", "must be at least 1")
	}
	if l.DeadlineAt.IsZero() {
		return fieldErr("lease.deadline_at", "required")
	}
	if !isObject(l.Policy) {
		return fieldErr("lease.policy", "must be an object")
	}
	if !isObject(l.Task) {
		return fieldErr("lease.task", "must be an object")
	}
	if l.ActivityVersion != "" && !activity.ValidVersionToken(l.ActivityVersion) {
		return fieldErr("lease.activity_version", "must be a version name")
	}
	if l.UsageVersion != "" && !activity.ValidVersionToken(l.UsageVersion) {
		return fieldErr("lease.usage_version", "must be a version name")
	}
	if l.Budget != nil {
		if l.UsageVersion == "" {
			return fieldErr("lease.budget", "only with a usage version")
		}
		if err := l.Budget.validate(); err != nil {
			return err
		}
	}
	if l.DefaultBranch != "" && (l.Kind != KindCoding || !ident.ValidBranch(l.DefaultBranch)) {
		return fieldErr("lease.default_branch", "a branch name, on coding leases only")
	}
	if err := l.checkSource(); err != nil {
		return err
	}
	if l.Kind != KindText && l.Kind != KindCoding {
		return fieldErr("lease.kind", "must be text or coding")
	}
	return nil
}

// Validate checks a heartbeat.
func (h *Heartbeat) Validate() error {
	if err := validateRefs("heartbeat", h.JobID, h.AttemptID); err != nil {
		return err
	}
	if h.Usage != nil {
		return h.Usage.validate("heartbeat.usage")
	}
	return nil
}

// Validate checks an evidence batch's envelope; the records' own schema is
// checked where they are stored.
func (e *Evidence) Validate() error {
	if err := validateRefs("evidence", e.JobID, e.AttemptID); err != nil {
		return err
	}
	if e.Batch < 1 || e.Batch > ident.MaxEvidenceBatches {
		return fieldErr("evidence.batch", "must be 1 or 2")
	}
	if len(e.Records) == 0 || len(e.Records) > ident.MaxEvidenceRecords {
		return fieldErr("evidence.records", "must hold 1 to 35 records")
	}
	for _, r := range e.Records {
		if !isObject(r) {
			return fieldErr("evidence.records", "each record must be an object")
		}
	}
	return nil
}

// Validate checks a result: success carries exactly one of output or
// candidate_sha, failure carries a well-formed code and a disposition
// (CheckFailure decides whether the pair is in the table).
func (r *Result) Validate() error {
	if err := validateRefs("result", r.JobID, r.AttemptID); err != nil {
		return err
	}
	switch r.Outcome {
	case OutcomeSucceeded:
		if r.Disposition != "" || r.FailureCode != "" {
			return fieldErr("result.failure_code", "not allowed on success")
		}
		if (r.Output != nil) == (r.CandidateSHA != "") {
			return fieldErr("result.output", "success carries exactly one of output or candidate_sha")
		}
		if r.Output != nil && (len(*r.Output) > plugin.TextBytes || !utf8.ValidString(*r.Output)) {
			return fieldErr("result.output", "must be UTF-8, at most 65536 bytes")
		}
		if r.CandidateSHA != "" && !ident.ValidSHA(r.CandidateSHA) {
			return fieldErr("result.candidate_sha", "must be 40 lowercase hex digits")
		}
		if r.AgentReport != nil {
			if r.CandidateSHA == "" {
				return fieldErr("result.agent_report", "only with candidate_sha")
			}
			if err := plugin.CheckReport(r.AgentReport.Summary, r.AgentReport.Changes); err != nil {
				return fieldErr("result.agent_report", "invalid report")
			}
		}
	case OutcomeFailed:
		if r.Output != nil || r.CandidateSHA != "" || r.AgentReport != nil {
			return fieldErr("result.output", "not allowed on failure")
		}
		// Table membership is checked by the receiver (CheckFailure), so
		// that an unknown code is refused, not treated as a violation.
		if !ident.ValidCode(r.FailureCode) {
			return fieldErr("result.failure_code", "must be a failure code")
		}
		if r.Disposition != DispositionRetryable && r.Disposition != DispositionTerminal {
			return fieldErr("result.disposition", "must be retryable or terminal")
		}
	default:
		return fieldErr("result.outcome", "must be succeeded or failed")
	}
	if r.Usage != nil {
		return r.Usage.validate("result.usage")
	}
	return nil
}

// Validate checks a reject.
func (r *Reject) Validate() error {
	switch r.Code {
	case RejectStale, RejectExpired, RejectConflict, RejectInvalid, RejectUnavailable:
		return nil
	}
	return fieldErr("reject.code", "unknown code")
}

// Validate checks a cancel.
func (c *Cancel) Validate() error {
	if err := validateRefs("cancel", c.JobID, c.AttemptID); err != nil {
		return err
	}
	if c.Reason == CancelExpired {
		return nil
	}
	return fieldErr("cancel.reason", "unknown reason")
}

// checkSource checks a lease's public-source field: on coding leases
// only, a full SHA.
func (l *Lease) checkSource() error {
	if l.BaseSHA == "" {
		return nil
	}
	if l.Kind != KindCoding {
		return fieldErr("lease.base_sha", "on coding leases only")
	}
	if !ident.ValidSHA(l.BaseSHA) {
		return fieldErr("lease.base_sha", "must be 40 lowercase hex digits")
	}
	return nil
}

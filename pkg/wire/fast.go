package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// The Gate sends an ack for every request and a lease for every attempt;
// these encoders build exactly the bytes Encode would (for compact policy
// and task documents) without reflection and without decoding the task
// again. Send the result with Conn.SendEncoded.

// EncodeAck encodes an ack for seq (≥ 1); deadline is set on heartbeat
// acks only (zero: omitted).
func EncodeAck(seq uint64, deadline time.Time) ([]byte, error) {
	if seq == 0 {
		return nil, fieldErr("seq", "required for this type")
	}
	b := make([]byte, 0, 96)
	b = append(b, `{"type":"ack","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"ack":{`...)
	if !deadline.IsZero() {
		b = append(b, `"deadline_at":"`...)
		b = deadline.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, "}}"...), nil
}

// EncodeLease encodes a lease. It checks everything Lease.Validate checks
// except that the task is only required to be a JSON object, not decoded
// against its kind (Lease.validateFields): the Gate sends tasks it
// validated at submission. An activity payload is refused (never sent by
// Gate).
// Policy and task are compacted as Encode would.
func EncodeLease(l *Lease) ([]byte, error) { return encodeLease(l, nil) }

// LeaseEncoder is EncodeLease with a memory: once the policy document of a
// lease has been found compact and valid, the next lease that carries the
// same bytes (every text lease of a Gate carries the same policy) has it
// copied without scanning it again. Its output and refusals are
// EncodeLease's. Safe for concurrent use; the zero value is ready.
type LeaseEncoder struct {
	policy atomic.Pointer[[]byte] // the last policy document found compact and valid
}

// Encode encodes a lease as EncodeLease does.
func (e *LeaseEncoder) Encode(l *Lease) ([]byte, error) { return encodeLease(l, e) }

// checked reports whether policy is the document e last found compact
// and valid.
func (e *LeaseEncoder) checked(policy []byte) bool {
	if e == nil {
		return false
	}
	p := e.policy.Load()
	return p != nil && bytes.Equal(*p, policy)
}

// remember records a policy document found compact and valid (a copy: the
// caller keeps its slice).
func (e *LeaseEncoder) remember(policy []byte) {
	if e != nil {
		p := bytes.Clone(policy)
		e.policy.Store(&p)
	}
}

func encodeLease(l *Lease, e *LeaseEncoder) ([]byte, error) {
	if err := l.validateFields(); err != nil {
		return nil, err
	}
	if l.DeadlineAt.Year() > 9999 || l.DeadlineAt.Year() < 0 {
		return nil, fieldErr("lease.deadline_at", "required") // not encodable as RFC 3339
	}
	if l.Activity != nil {
		// Activity belongs to activity messages only; Gate never sends it.
		return nil, fieldErr("lease.activity", "not allowed")
	}
	// Room for every key, the ordinal and the deadline (at most 256
	// bytes together) and the values: one allocation.
	b := make([]byte, 0, 256+len(l.JobID)+len(l.AttemptID)+len(l.Policy)+len(l.Task)+len(l.DefaultBranch)+
		len(l.BaseSHA)+len(l.ActivityVersion)+len(l.UsageVersion)+96)
	b = append(b, `{"type":"lease","lease":{"job_id":"`...)
	b = append(b, l.JobID...) // ident.ValidRef: nothing to escape
	b = append(b, `","attempt_id":"`...)
	b = append(b, l.AttemptID...)
	b = append(b, `","ordinal":`...)
	b = strconv.AppendInt(b, int64(l.Ordinal), 10)
	b = append(b, `,"deadline_at":"`...)
	b = l.DeadlineAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":"`...)
	b = append(b, l.Kind...)
	b = append(b, `","policy":`...)
	if e.checked(l.Policy) {
		b = append(b, l.Policy...)
	} else {
		var verbatim bool
		var err error
		if b, verbatim, err = appendCompact(b, l.Policy); err != nil {
			return nil, fieldErr("lease.policy", "must be an object")
		}
		if verbatim {
			e.remember(l.Policy)
		}
	}
	b = append(b, `,"task":`...)
	var err error
	if b, _, err = appendCompact(b, l.Task); err != nil {
		return nil, fieldErr("lease.task", "must be an object")
	}
	if l.DefaultBranch != "" {
		b = append(b, `,"default_branch":"`...)
		b = append(b, l.DefaultBranch...) // ident.ValidBranch: nothing to escape
		b = append(b, '"')
	}
	if l.BaseSHA != "" {
		b = append(b, `,"base_sha":"`...)
		b = append(b, l.BaseSHA...) // ident.ValidSHA: nothing to escape
		b = append(b, '"')
	}
	if l.ActivityVersion != "" {
		b = append(b, `,"activity_version":"`...)
		b = append(b, l.ActivityVersion...) // a version token: nothing to escape
		b = append(b, '"')
	}
	if l.UsageVersion != "" {
		b = append(b, `,"usage_version":"`...)
		b = append(b, l.UsageVersion...) // a version token: nothing to escape
		b = append(b, '"')
	}
	if l.Budget != nil {
		b = append(b, `,"budget":{`...)
		sep := ""
		if v := l.Budget.MaxTokens; v != nil {
			b = append(b, `"max_tokens":`...)
			b = strconv.AppendInt(b, *v, 10)
			sep = ","
		}
		if v := l.Budget.MaxRequests; v != nil {
			b = append(b, sep+`"max_requests":`...)
			b = strconv.AppendInt(b, *v, 10)
		}
		b = append(b, '}')
	}
	b = append(b, "}}"...)
	if len(b) > MaxMessageBytes {
		return nil, ErrTooLarge
	}
	return b, nil
}

// appendCompact appends raw to b as json.Compact writes it. The documents
// Gate stores are compact already: one that has no space outside its
// strings and passes strictjson's scanner (stricter than json.Compact's) is
// copied as it is, which is what json.Compact would write; anything else
// goes through json.Compact. verbatim reports the first case.
func appendCompact(b, raw []byte) (out []byte, verbatim bool, err error) {
	if isCompact(raw) && strictjson.Check(raw, rawMessageType) == nil {
		return append(b, raw...), true, nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, false, err
	}
	return buf.Bytes(), false, nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// isCompact reports whether b has no JSON whitespace outside strings.
func isCompact(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}

// EncodeResult encodes a result message (seq ≥ 1) exactly as Encode would,
// after the same validation, without reflection. A result that carries an
// agent report (coding) is encoded by Encode.
func EncodeResult(seq uint64, r *Result) ([]byte, error) {
	e := Envelope{Type: TypeResult, Seq: seq, Result: r}
	if r == nil || r.AgentReport != nil {
		return Encode(e)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("wire: encode: %w", err)
	}
	n := 256
	if r.Output != nil {
		n += len(*r.Output) + len(*r.Output)/8
	}
	b := make([]byte, 0, n)
	b = append(b, `{"type":"result","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"result":{"job_id":`...)
	b = strictjson.AppendString(b, r.JobID)
	b = append(b, `,"attempt_id":`...)
	b = strictjson.AppendString(b, r.AttemptID)
	b = append(b, `,"outcome":`...)
	b = strictjson.AppendString(b, string(r.Outcome))
	if r.Output != nil {
		b = append(b, `,"output":`...)
		b = strictjson.AppendString(b, *r.Output)
	}
	if r.CandidateSHA != "" {
		b = append(b, `,"candidate_sha":`...)
		b = strictjson.AppendString(b, r.CandidateSHA)
	}
	if r.Disposition != "" {
		b = append(b, `,"disposition":`...)
		b = strictjson.AppendString(b, string(r.Disposition))
	}
	if r.FailureCode != "" {
		b = append(b, `,"failure_code":`...)
		b = strictjson.AppendString(b, r.FailureCode)
	}
	if u := r.Usage; u != nil {
		b = append(b, `,"usage":{"requests":`...)
		b = strconv.AppendInt(b, u.Requests, 10)
		b = append(b, `,"input_tokens":`...)
		b = strconv.AppendInt(b, u.InputTokens, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, u.OutputTokens, 10)
		b = append(b, `,"cached_tokens":`...)
		b = strconv.AppendInt(b, u.CachedTokens, 10)
		b = append(b, '}')
	}
	b = append(b, "}}"...)
	if len(b) > MaxMessageBytes {
		return nil, ErrTooLarge
	}
	return b, nil
}

// EncodeActivity encodes an activity message exactly as Encode would,
// after the same validation, without reflection.
func EncodeActivity(p *Activity) ([]byte, error) {
	e := Envelope{Type: TypeActivity, Activity: p}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("wire: encode: %w", err)
	}
	b := make([]byte, 0, 96+len(p.JobID)+len(p.AttemptID)+len(p.Version)+len(p.Stage))
	b = append(b, `{"type":"activity","activity":{"job_id":`...)
	b = strictjson.AppendString(b, p.JobID)
	b = append(b, `,"attempt_id":`...)
	b = strictjson.AppendString(b, p.AttemptID)
	b = append(b, `,"version":`...)
	b = strictjson.AppendString(b, p.Version)
	b = append(b, `,"stage":`...)
	b = strictjson.AppendString(b, string(p.Stage))
	return append(b, "}}"...), nil
}

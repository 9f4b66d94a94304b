package wire

import (
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Decoding a message is strictjson.Check (syntax, shape, no unknown,
// duplicate or null keys) followed by filling the Envelope. For the
// messages of every attempt (lease, ack, result, heartbeat, activity and
// the small Gate answers) the filling is done here, by one walk over the
// checked bytes, instead of by encoding/json, which would scan them twice
// more and reflect over every field. The walk relies on what Check
// established and produces exactly what encoding/json would
// (FuzzFastDecodeMatches); for anything else, or anything unexpected, it
// gives up and encoding/json decodes the message instead.

var (
	envelopeType = reflect.TypeOf(Envelope{})
	textTaskType = reflect.TypeOf(TextTask{})
)

// decodeEnvelope strictly decodes data into an Envelope (not validated).
func decodeEnvelope(data []byte) (Envelope, error) {
	if err := strictjson.Check(data, envelopeType); err != nil {
		return Envelope{}, err
	}
	var e Envelope
	if fillEnvelope(data, &e) {
		return e, nil
	}
	e = Envelope{}
	if err := strictjson.Decode(data, &e); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// decodeTextTask strictly decodes a text task (not validated).
func decodeTextTask(data []byte) (TextTask, error) {
	if err := strictjson.Check(data, textTaskType); err != nil {
		return TextTask{}, err
	}
	var t TextTask
	r := &checked{strictjson.NewCursor(data)}
	if r.Object(func(k []byte) bool { return string(k) == "input" && textTo(r, &t.Input) }) && r.End() {
		return t, nil
	}
	t = TextTask{}
	if err := strictjson.Decode(data, &t); err != nil {
		return TextTask{}, err
	}
	return t, nil
}

// fillEnvelope fills e from data that Check accepted as an Envelope. It
// reports false, leaving e to be discarded, for a payload it does not
// handle or anything unexpected.
func fillEnvelope(data []byte, e *Envelope) bool {
	r := &checked{strictjson.NewCursor(data)}
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "type":
			return textTo(r, &e.Type)
		case "seq":
			var ok bool
			e.Seq, ok = r.uint64()
			return ok
		case "lease":
			e.Lease = &Lease{}
			return r.lease(e.Lease)
		case "ack":
			e.Ack = &Ack{}
			return r.Object(func(k []byte) bool {
				return string(k) == "deadline_at" && r.time(&e.Ack.DeadlineAt)
			})
		case "result":
			e.Result = &Result{}
			return r.result(e.Result)
		case "heartbeat":
			h := &Heartbeat{}
			e.Heartbeat = h
			return r.Object(func(k []byte) bool {
				if string(k) == "usage" {
					h.Usage = &Usage{}
					return r.usage(h.Usage)
				}
				return r.refs(k, &h.JobID, &h.AttemptID)
			})
		case "welcome":
			w := &Welcome{}
			e.Welcome = w
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "lane":
					return textTo(r, &w.Lane)
				case "generation":
					return textTo(r, &w.Generation)
				}
				return false
			})
		case "reject":
			j := &Reject{}
			e.Reject = j
			return r.Object(func(k []byte) bool {
				if string(k) != "code" {
					return false
				}
				return textTo(r, &j.Code)
			})
		case "cancel":
			c := &Cancel{}
			e.Cancel = c
			return r.Object(func(k []byte) bool {
				if string(k) == "reason" {
					return textTo(r, &c.Reason)
				}
				return r.refs(k, &c.JobID, &c.AttemptID)
			})
		case "activity":
			a := &Activity{}
			e.Activity = a
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "version":
					return textTo(r, &a.Version)
				case "stage":
					return textTo(r, &a.Stage)
				}
				return r.refs(k, &a.JobID, &a.AttemptID)
			})
		}
		return false // hello, evidence: encoding/json
	}) && r.End()
}

func (r *checked) lease(l *Lease) bool {
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "ordinal":
			var ok bool
			l.Ordinal, ok = r.int()
			return ok
		case "deadline_at":
			return r.time(&l.DeadlineAt)
		case "kind":
			return textTo(r, &l.Kind)
		case "policy":
			return r.raw(&l.Policy)
		case "task":
			return r.raw(&l.Task)
		case "default_branch":
			return textTo(r, &l.DefaultBranch)
		case "base_sha":
			return textTo(r, &l.BaseSHA)
		case "activity_version":
			return textTo(r, &l.ActivityVersion)
		case "activity":
			return r.raw(&l.Activity)
		case "usage_version":
			return textTo(r, &l.UsageVersion)
		case "budget":
			b := &Budget{}
			l.Budget = b
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "max_tokens":
					return r.int64p(&b.MaxTokens)
				case "max_requests":
					return r.int64p(&b.MaxRequests)
				}
				return false
			})
		}
		return r.refs(k, &l.JobID, &l.AttemptID)
	})
}

func (r *checked) result(res *Result) bool {
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "outcome":
			return textTo(r, &res.Outcome)
		case "output":
			s, ok := r.Text()
			res.Output = &s
			return ok
		case "candidate_sha":
			return textTo(r, &res.CandidateSHA)
		case "disposition":
			return textTo(r, &res.Disposition)
		case "failure_code":
			return textTo(r, &res.FailureCode)
		case "usage":
			res.Usage = &Usage{}
			return r.usage(res.Usage)
		case "agent_report":
			a := &AgentReport{}
			res.AgentReport = a
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "summary":
					return textTo(r, &a.Summary)
				case "changes":
					a.Changes = []string{}
					return r.Array(func() bool {
						s, ok := r.Text()
						a.Changes = append(a.Changes, s)
						return ok
					})
				}
				return false
			})
		}
		return r.refs(k, &res.JobID, &res.AttemptID)
	})
}

// checked walks a document strictjson.Check accepted, with the readers
// of the wire's own field types on top of strictjson.Cursor.
type checked struct {
	*strictjson.Cursor
}

// refs reads the job_id or attempt_id member named k.
func (r *checked) refs(k []byte, job, attempt *string) bool {
	switch string(k) {
	case "job_id":
		return textTo(r, job)
	case "attempt_id":
		return textTo(r, attempt)
	}
	return false
}

// textTo reads a string into dst, a string or a string-based wire type.
func textTo[T ~string](r *checked, dst *T) bool {
	s, ok := r.Text()
	*dst = T(s)
	return ok
}

func (r *checked) uint64() (uint64, bool) {
	n, err := strconv.ParseUint(string(r.Number()), 10, 64)
	return n, err == nil
}

func (r *checked) int() (int, bool) {
	n, err := strconv.ParseInt(string(r.Number()), 10, 0)
	return int(n), err == nil
}

func (r *checked) int64(dst *int64) bool {
	n, err := strconv.ParseInt(string(r.Number()), 10, 64)
	*dst = n
	return err == nil
}

func (r *checked) int64p(dst **int64) bool {
	var n int64
	*dst = &n
	return r.int64(&n)
}

// raw copies the next value into dst, as json.RawMessage decoding does.
func (r *checked) raw(dst *json.RawMessage) bool {
	v, ok := r.Value()
	if !ok {
		return false
	}
	*dst = append([]byte(nil), v...)
	return true
}

// time decodes a string as time.Time's UnmarshalJSON does; a value it
// refuses is left to encoding/json (which reports it).
func (r *checked) time(t *time.Time) bool {
	b, ok := r.Quoted()
	return ok && t.UnmarshalJSON(b) == nil
}

// usage fills a usage object (result or heartbeat).
func (r *checked) usage(u *Usage) bool {
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "requests":
			return r.int64(&u.Requests)
		case "input_tokens":
			return r.int64(&u.InputTokens)
		case "output_tokens":
			return r.int64(&u.OutputTokens)
		case "cached_tokens":
			return r.int64(&u.CachedTokens)
		}
		return false
	})
}

package wire

import (
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
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
// gives up and encoding/json decodes the message as before.

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
	r := checked{d: data}
	if r.object(func(k []byte) bool {
		if string(k) != "input" {
			return false
		}
		var ok bool
		t.Input, ok = r.str()
		return ok
	}) && r.end() {
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
	r := checked{d: data}
	return r.object(func(k []byte) bool {
		switch string(k) {
		case "type":
			s, ok := r.str()
			e.Type = Type(s)
			return ok
		case "seq":
			var ok bool
			e.Seq, ok = r.uint64()
			return ok
		case "lease":
			e.Lease = &Lease{}
			return r.lease(e.Lease)
		case "ack":
			e.Ack = &Ack{}
			return r.object(func(k []byte) bool {
				return string(k) == "deadline_at" && r.time(&e.Ack.DeadlineAt)
			})
		case "result":
			e.Result = &Result{}
			return r.result(e.Result)
		case "heartbeat":
			h := &Heartbeat{}
			e.Heartbeat = h
			return r.object(func(k []byte) bool {
				return r.refs(k, &h.JobID, &h.AttemptID)
			})
		case "welcome":
			w := &Welcome{}
			e.Welcome = w
			return r.object(func(k []byte) bool {
				switch string(k) {
				case "lane":
					return r.strTo(&w.Lane)
				case "generation":
					return r.strTo(&w.Generation)
				}
				return false
			})
		case "reject":
			j := &Reject{}
			e.Reject = j
			return r.object(func(k []byte) bool {
				if string(k) != "code" {
					return false
				}
				s, ok := r.str()
				j.Code = RejectCode(s)
				return ok
			})
		case "cancel":
			c := &Cancel{}
			e.Cancel = c
			return r.object(func(k []byte) bool {
				if string(k) == "reason" {
					s, ok := r.str()
					c.Reason = CancelReason(s)
					return ok
				}
				return r.refs(k, &c.JobID, &c.AttemptID)
			})
		case "activity":
			a := &Activity{}
			e.Activity = a
			return r.object(func(k []byte) bool {
				switch string(k) {
				case "version":
					return r.strTo(&a.Version)
				case "stage":
					s, ok := r.str()
					a.Stage = activity.Stage(s)
					return ok
				}
				return r.refs(k, &a.JobID, &a.AttemptID)
			})
		}
		return false // hello, evidence: encoding/json
	}) && r.end()
}

func (r *checked) lease(l *Lease) bool {
	return r.object(func(k []byte) bool {
		switch string(k) {
		case "ordinal":
			var ok bool
			l.Ordinal, ok = r.int()
			return ok
		case "deadline_at":
			return r.time(&l.DeadlineAt)
		case "kind":
			s, ok := r.str()
			l.Kind = Kind(s)
			return ok
		case "policy":
			return r.raw(&l.Policy)
		case "task":
			return r.raw(&l.Task)
		case "default_branch":
			return r.strTo(&l.DefaultBranch)
		case "activity_version":
			return r.strTo(&l.ActivityVersion)
		case "activity":
			return r.raw(&l.Activity)
		}
		return r.refs(k, &l.JobID, &l.AttemptID)
	})
}

func (r *checked) result(res *Result) bool {
	return r.object(func(k []byte) bool {
		switch string(k) {
		case "outcome":
			s, ok := r.str()
			res.Outcome = Outcome(s)
			return ok
		case "output":
			s, ok := r.str()
			res.Output = &s
			return ok
		case "candidate_sha":
			return r.strTo(&res.CandidateSHA)
		case "disposition":
			s, ok := r.str()
			res.Disposition = Disposition(s)
			return ok
		case "failure_code":
			return r.strTo(&res.FailureCode)
		case "agent_report":
			a := &AgentReport{}
			res.AgentReport = a
			return r.object(func(k []byte) bool {
				switch string(k) {
				case "summary":
					return r.strTo(&a.Summary)
				case "changes":
					a.Changes = []string{}
					return r.array(func() bool {
						s, ok := r.str()
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

// checked reads a document that strictjson.Check accepted: its syntax is
// valid, so the reader only finds its way; every method still reports
// false on a surprise instead of trusting that.
type checked struct {
	d []byte
	i int
}

func (r *checked) space() {
	for r.i < len(r.d) && (r.d[r.i] == ' ' || r.d[r.i] == '\t' || r.d[r.i] == '\n' || r.d[r.i] == '\r') {
		r.i++
	}
}

// next skips space and consumes c if it comes next.
func (r *checked) next(c byte) bool {
	r.space()
	if r.i < len(r.d) && r.d[r.i] == c {
		r.i++
		return true
	}
	return false
}

// end reports whether only space is left.
func (r *checked) end() bool {
	r.space()
	return r.i == len(r.d)
}

// object reads an object, calling member with each key (unescaped) to read
// its value.
func (r *checked) object(member func(key []byte) bool) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return true
	}
	for {
		r.space()
		k, ok := r.strBytes()
		if !ok || !r.next(':') || !member(k) {
			return false
		}
		if r.next('}') {
			return true
		}
		if !r.next(',') {
			return false
		}
	}
}

// array reads an array, calling elem to read each element.
func (r *checked) array(elem func() bool) bool {
	if !r.next('[') {
		return false
	}
	if r.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if r.next(']') {
			return true
		}
		if !r.next(',') {
			return false
		}
	}
}

// refs reads the job_id or attempt_id member named k.
func (r *checked) refs(k []byte, job, attempt *string) bool {
	switch string(k) {
	case "job_id":
		return r.strTo(job)
	case "attempt_id":
		return r.strTo(attempt)
	}
	return false
}

func (r *checked) strTo(dst *string) bool {
	s, ok := r.str()
	*dst = s
	return ok
}

func (r *checked) str() (string, bool) {
	b, ok := r.strBytes()
	return string(b), ok
}

// strBytes reads a string and returns its unescaped content, which may
// alias the document.
func (r *checked) strBytes() ([]byte, bool) {
	r.space()
	if r.i >= len(r.d) || r.d[r.i] != '"' {
		return nil, false
	}
	start, escaped := r.i+1, false
	for i := start; i < len(r.d); i++ {
		switch r.d[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			r.i = i + 1
			if escaped {
				return strictjson.Unescape(r.d[start:i])
			}
			return r.d[start:i], true
		}
	}
	return nil, false
}

// number returns the text of a number.
func (r *checked) number() []byte {
	r.space()
	start := r.i
	for r.i < len(r.d) {
		switch c := r.d[r.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			r.i++
			continue
		}
		break
	}
	return r.d[start:r.i]
}

func (r *checked) uint64() (uint64, bool) {
	n, err := strconv.ParseUint(string(r.number()), 10, 64)
	return n, err == nil
}

func (r *checked) int() (int, bool) {
	n, err := strconv.ParseInt(string(r.number()), 10, 0)
	return int(n), err == nil
}

// value returns the bytes of the next value, which must be an object,
// array or string (what the raw fields hold).
func (r *checked) value() ([]byte, bool) {
	r.space()
	start, depth := r.i, 0
	for r.i < len(r.d) {
		switch r.d[r.i] {
		case '"':
			if _, ok := r.strBytesRaw(); !ok {
				return nil, false
			}
			if depth == 0 {
				return r.d[start:r.i], true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				r.i++
				return r.d[start:r.i], true
			}
			if depth < 0 {
				return nil, false
			}
		default:
			if depth == 0 {
				return nil, false // a scalar: not a raw field's value here
			}
		}
		r.i++
	}
	return nil, false
}

// strBytesRaw skips a string without unescaping it.
func (r *checked) strBytesRaw() ([]byte, bool) {
	start := r.i
	for i := r.i + 1; i < len(r.d); i++ {
		switch r.d[i] {
		case '\\':
			i++
		case '"':
			r.i = i + 1
			return r.d[start:r.i], true
		}
	}
	return nil, false
}

// raw copies the next value into dst, as json.RawMessage decoding does.
func (r *checked) raw(dst *json.RawMessage) bool {
	v, ok := r.value()
	if !ok {
		return false
	}
	*dst = append([]byte(nil), v...)
	return true
}

// time decodes a string as time.Time's UnmarshalJSON does; a value it
// refuses is left to encoding/json (which reports it).
func (r *checked) time(t *time.Time) bool {
	r.space()
	if r.i >= len(r.d) || r.d[r.i] != '"' {
		return false
	}
	b, ok := r.strBytesRaw()
	return ok && t.UnmarshalJSON(b) == nil
}

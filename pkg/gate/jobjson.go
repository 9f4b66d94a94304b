package gate

import (
	"encoding/json"
	"strconv"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// jobJSON is json.Marshal(j) without reflection for the jobs a submit
// answers with (no result, delivery view or usage yet, every string plain: a
// validated id, kind, status or code). Any other job goes through
// json.Marshal. TestJobJSONMatchesMarshal and FuzzJobJSON hold it to
// json.Marshal's bytes.
func jobJSON(j store.Job) ([]byte, error) {
	if j.Result != nil || j.Delivery != nil || j.Usage != nil || !plainJSON(j.ID) || !plainJSON(j.Kind) || !plainJSON(j.Status) ||
		!plainJSON(j.FailureCode) || !plainJSON(j.CandidateSHA) || !plainJSON(j.RepositoryID) {
		return json.Marshal(j)
	}
	b := make([]byte, 0, 192+len(j.ID)+len(j.RepositoryID)+len(j.CandidateSHA))
	b = append(b, `{"id":"`...)
	b = append(b, j.ID...)
	b = append(b, `","kind":"`...)
	b = append(b, j.Kind...)
	b = append(b, `","status":"`...)
	b = append(b, j.Status...)
	b = append(b, '"')
	b = appendOptional(b, `,"failure_code":"`, j.FailureCode)
	b = appendOptional(b, `,"candidate_sha":"`, j.CandidateSHA)
	b = appendOptional(b, `,"repository_id":"`, j.RepositoryID)
	b = append(b, `,"attempt_count":`...)
	b = strconv.AppendInt(b, int64(j.AttemptCount), 10)
	if j.RetryAt != nil {
		b = appendTime(append(b, `,"retry_at":`...), *j.RetryAt)
	}
	b = appendTime(append(b, `,"created_at":`...), j.CreatedAt)
	b = appendTime(append(b, `,"updated_at":`...), j.UpdatedAt)
	return append(b, '}'), nil
}

// appendOptional appends key (which opens the string) and v, unless v is
// empty (omitempty).
func appendOptional(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, key...)
	b = append(b, v...)
	return append(b, '"')
}

// appendTime appends t as store.Time's MarshalJSON renders it.
func appendTime(b []byte, t store.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, store.TimeFormat)
	return append(b, '"')
}

// plainJSON reports whether json.Marshal writes s as it is between
// quotation marks: printable ASCII without the characters it escapes
// (quotation mark, backslash and, with HTML escaping, < > &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// Event types of `codex exec --json` (codex-cli 0.169.0).
const (
	EventThreadStarted = "thread.started"
	EventTurnStarted   = "turn.started"
	EventTurnCompleted = "turn.completed"
	EventTurnFailed    = "turn.failed"
	EventItemStarted   = "item.started"
	EventItemUpdated   = "item.updated"
	EventItemCompleted = "item.completed"
	EventError         = "error"
)

// MaxEventBytes bounds one event line (without its LF).
const MaxEventBytes = 4 << 20

// errMalformedEvent is returned by EventType for any line it rejects.
var errMalformedEvent = errors.New("codex: malformed event")

// EventType returns the top-level "type" of one event line (without its
// LF). The line must be at most MaxEventBytes of valid UTF-8 holding one
// JSON object with unique top-level keys, a non-empty string "type", and
// nothing after it. Nested values are checked for well-formedness only;
// they may hold null, which the provider uses for absent values.
func EventType(line []byte) (string, error) {
	if len(line) > MaxEventBytes || !utf8.Valid(line) || !json.Valid(line) {
		return "", errMalformedEvent
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", errMalformedEvent
	}
	seen := make(map[string]struct{})
	typ, found := "", false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", errMalformedEvent
		}
		key, ok := tok.(string)
		if !ok {
			return "", errMalformedEvent
		}
		if _, dup := seen[key]; dup {
			return "", errMalformedEvent
		}
		seen[key] = struct{}{}
		if key != "type" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", errMalformedEvent
			}
			continue
		}
		tok, err = dec.Token()
		s, ok := tok.(string)
		if err != nil || !ok || s == "" {
			return "", errMalformedEvent
		}
		typ, found = s, true
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return "", errMalformedEvent
	}
	if _, err := dec.Token(); err != io.EOF || !found {
		return "", errMalformedEvent
	}
	return typ, nil
}

// Stream is the adapter's view of one event stream: what it acts on and
// counts. The zero value is an empty stream.
type Stream struct {
	Events    int  // well-formed events seen
	Unknown   int  // events of a type the adapter does not know
	Turns     int  // turn.started events
	Completed bool // a turn.completed arrived
	Failed    bool // a turn.failed or error event arrived
	Malformed bool // a line was rejected; nothing after it is believed
}

// Observe takes one line (without its LF) and reports whether it was the
// first turn.started. After a malformed line it ignores everything.
func (s *Stream) Observe(line []byte) (firstTurn bool) {
	if s.Malformed {
		return false
	}
	typ, err := EventType(line)
	if err != nil {
		s.Malformed = true
		return false
	}
	s.Events++
	switch typ {
	case EventTurnStarted:
		s.Turns++
		return s.Turns == 1
	case EventTurnCompleted:
		s.Completed = true
	case EventTurnFailed, EventError:
		s.Failed = true
	case EventThreadStarted, EventItemStarted, EventItemUpdated, EventItemCompleted:
	default:
		s.Unknown++
	}
	return false
}

// Verdict is the stream's contribution to the run's outcome: nil only for
// a well-formed stream with a completion and no failure.
func (s *Stream) Verdict() error {
	switch {
	case s.Malformed:
		return &Error{Reason: ReasonMalformedEvents}
	case s.Failed:
		return &Error{Reason: ReasonProviderFailed}
	case !s.Completed:
		return &Error{Reason: ReasonNoCompletion}
	}
	return nil
}

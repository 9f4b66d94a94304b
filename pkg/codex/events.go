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

// ItemError is the item type Codex uses for a diagnostic it shows as an
// item (a transport fallback, missing model metadata); the turn goes on.
const ItemError = "error"

// EventType returns the top-level "type" of one event line (without its
// LF). The line must be at most MaxEventBytes of valid UTF-8 holding one
// JSON object with unique top-level keys, a non-empty string "type", and
// nothing after it. Nested values are checked for well-formedness only;
// they may hold null, which the provider uses for absent values.
func EventType(line []byte) (string, error) {
	typ, _, err := eventKind(line)
	return typ, err
}

// eventKind is EventType plus the "type" of a top-level "item" object
// ("" when there is none or it is not a string). The item type only
// classifies diagnostics, so a nested value is not held to the top-level
// rules (a repeated nested key counts as its last value).
func eventKind(line []byte) (typ, itemType string, err error) {
	if len(line) > MaxEventBytes || !utf8.Valid(line) || !json.Valid(line) {
		return "", "", errMalformedEvent
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", "", errMalformedEvent
	}
	seen := make(map[string]struct{})
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", errMalformedEvent
		}
		key, ok := tok.(string)
		if !ok {
			return "", "", errMalformedEvent
		}
		if _, dup := seen[key]; dup {
			return "", "", errMalformedEvent
		}
		seen[key] = struct{}{}
		if key != "type" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", "", errMalformedEvent
			}
			if key == "item" {
				var it struct {
					Type json.RawMessage `json:"type"`
				}
				var t string
				if json.Unmarshal(skip, &it) == nil && json.Unmarshal(it.Type, &t) == nil {
					itemType = t
				}
			}
			continue
		}
		tok, err = dec.Token()
		s, ok := tok.(string)
		if err != nil || !ok || s == "" {
			return "", "", errMalformedEvent
		}
		typ, found = s, true
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return "", "", errMalformedEvent
	}
	if _, err := dec.Token(); err != io.EOF || !found {
		return "", "", errMalformedEvent
	}
	return typ, itemType, nil
}

// Stream is the adapter's view of one event stream: what it acts on and
// counts. The zero value is an empty stream.
type Stream struct {
	Events    int  // well-formed events seen
	Unknown   int  // events of a type the adapter does not know
	Turns     int  // turn.started events
	Completed bool // a turn.completed arrived
	Failed    bool // a turn.failed arrived
	Malformed bool // a line was rejected; nothing after it is believed
	// Diagnostics: Codex reports these and goes on (a retried stream, a
	// transport fallback); they never decide the outcome.
	Errors     int // error events
	ErrorItems int // item.* events whose item is of type "error"
}

// Observe takes one line (without its LF) and reports whether it was the
// first turn.started. After a malformed line it ignores everything.
func (s *Stream) Observe(line []byte) (firstTurn bool) {
	if s.Malformed {
		return false
	}
	typ, itemType, err := eventKind(line)
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
	case EventTurnFailed:
		s.Failed = true
	case EventError:
		s.Errors++
	case EventItemCompleted:
		if itemType == ItemError {
			s.ErrorItems++
		}
	case EventThreadStarted, EventItemStarted, EventItemUpdated:
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

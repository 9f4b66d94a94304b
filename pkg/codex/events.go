package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/agent"
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
const MaxEventBytes = agent.DefaultMaxLineBytes

// errMalformedEvent is returned by EventType for any line it rejects.
var errMalformedEvent = errors.New("codex: malformed event")

// ItemError is the item type Codex uses for a diagnostic it shows as an
// item (a transport fallback, missing model metadata); the turn goes on.
const ItemError = "error"

// kindErrorItem is the completion-table kind of an item.completed whose
// item is of type "error".
const kindErrorItem = EventItemCompleted + "/" + ItemError

// kindRefused is the kind of an error event or turn.failed reporting that
// the provider refused the credentials.
const kindRefused = "auth.refused"

// refused401 and refused403 are how codex-cli 0.169.0 words an HTTP 401 or 403 from
// the provider in an error event's message and in turn.failed's
// error.message ("unexpected status 401 Unauthorized: …"; captured in
// testdata/events/provider-401-refused.jsonl). It retries them five
// times, so the adapter stops it at the first.
const (
	refused401 = "unexpected status 401 "
	refused403 = "unexpected status 403 "
)

// Rules is Codex's closed completion table: one turn, turn.started then
// turn.completed (or turn.failed), the item lifecycle in between; error
// events (a dropped stream Codex retries, "Reconnecting... 1/5") and error
// items (a transport fallback) are diagnostics, before or during the turn;
// nothing may follow turn.completed. An error event or turn.failed saying
// the provider answered 401 or 403 is a refusal of the credentials: the
// run stops at once as a misconfiguration. Any other type fails the run
// closed.
func Rules() agent.Rules {
	return agent.Rules{
		EventThreadStarted: {Effect: agent.Known},
		EventTurnStarted:   {Effect: agent.Begin},
		EventTurnCompleted: {Effect: agent.Complete},
		EventTurnFailed:    {Effect: agent.Fail},
		EventItemStarted:   {Effect: agent.Known},
		EventItemUpdated:   {Effect: agent.Known},
		EventItemCompleted: {Effect: agent.Known},
		kindErrorItem:      {Effect: agent.Diagnostic},
		EventError:         {Effect: agent.Diagnostic},
		kindRefused:        {Effect: agent.Refused},
	}
}

// Classify reads one event line into its completion-table kind: the
// top-level type, or "item.completed/error" for an error item.
func Classify(line []byte) (agent.Event, error) {
	typ, itemType, err := eventKind(line)
	if err != nil {
		return agent.Event{}, err
	}
	switch {
	case typ == EventItemCompleted && itemType == ItemError:
		return agent.Event{Kind: kindErrorItem}, nil
	case (typ == EventError || typ == EventTurnFailed) && refused(line):
		return agent.Event{Kind: kindRefused}, nil
	}
	return agent.Event{Kind: typ}, nil
}

// refused reports whether an error event's message, or turn.failed's
// error.message, says the provider refused the credentials.
func refused(line []byte) bool {
	var e struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &e) != nil {
		return false
	}
	var msg string
	if json.Unmarshal(e.Message, &msg) != nil {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) != nil {
			return false
		}
		msg = inner.Message
	}
	return strings.Contains(msg, refused401) || strings.Contains(msg, refused403)
}

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

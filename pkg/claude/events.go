package claude

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// MaxEventBytes bounds one event line (without its LF).
const MaxEventBytes = agent.DefaultMaxLineBytes

// errMalformedEvent is returned by Classify for any line it rejects.
var errMalformedEvent = errors.New("claude: malformed event")

// Completion-table kinds the classifier produces besides "TYPE" and
// "system/SUBTYPE".
const (
	kindResultSuccess = "result/success" // subtype success, is_error false
	kindResultError   = "result/error"   // is_error true, or an error_* subtype
	kindAuthRefused   = "auth/refused"   // a retry after 401/403, or the synthetic authentication_failed answer
)

// resultErrorSubtypes are the documented error subtypes of the final
// result event (Claude Code 2.1.328).
var resultErrorSubtypes = []string{"error_during_execution", "error_max_turns", "error_max_budget_usd",
	"error_max_structured_output_retries"}

// Rules is Claude Code's closed completion table for `claude -p
// --output-format stream-json --verbose` (2.1.328, events captured in
// testdata/events): system/init begins the session; the final result
// event completes it when its subtype is success and is_error is false,
// and fails it otherwise; nothing may follow it. The model's messages
// (assistant, user with tool results) and session metadata are known;
// retried API calls (system/api_retry: a cut stream, a 5xx, an overload),
// refused permissions (an edit outside the workspace) and tool results
// marked is_error are diagnostics. A retry after the provider refused the
// credentials, or the synthetic assistant answer Claude Code gives when
// authentication failed, stops the run as a misconfiguration. Any other type or
// system subtype fails the run closed.
func Rules() agent.Rules {
	r := agent.Rules{
		"system/init":              {Effect: agent.Begin},
		"system/ui_invalidate":     {Effect: agent.Known},
		"system/status":            {Effect: agent.Known},
		"system/informational":     {Effect: agent.Known},
		"system/notification":      {Effect: agent.Known},
		"system/compact_boundary":  {Effect: agent.Known},
		"system/thinking_tokens":   {Effect: agent.Known},
		"system/turn_duration":     {Effect: agent.Known},
		"system/api_retry":         {Effect: agent.Diagnostic},
		"system/api_error":         {Effect: agent.Diagnostic},
		"system/permission_denied": {Effect: agent.Diagnostic},
		"system/model_fallback":    {Effect: agent.Diagnostic},
		kindAuthRefused:            {Effect: agent.Refused},
		"assistant":                {Effect: agent.Known},
		"user":                     {Effect: agent.Known},
		"rate_limit_event":         {Effect: agent.Known},
		kindResultSuccess:          {Effect: agent.Complete},
		kindResultError:            {Effect: agent.Fail},
	}
	return r
}

// header is what every stream-json line must have.
type header struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
}

// retry is the part of system/api_retry the adapter reads.
type retry struct {
	Error       json.RawMessage `json:"error"`
	ErrorStatus json.RawMessage `json:"error_status"`
}

// result is the part of the final result the adapter reads.
type result struct {
	IsError    *bool           `json:"is_error"`
	Structured json.RawMessage `json:"structured_output"`
}

// userMessage is the part of a user event the adapter reads.
type userMessage struct {
	Message struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// Classify reads one stream-json line into its completion-table kind. The
// line must be at most MaxEventBytes of valid UTF-8 holding one JSON
// object with unique top-level keys and a non-empty string "type" (and a
// string "subtype" for system and result events); the members the adapter
// acts on (result.is_error) must have their documented types. A result
// event carries its structured_output as the final answer; a user event
// counts its tool results marked is_error as diagnostics; a retry whose
// error is authentication_failed or whose status is 401 or 403 is a
// refusal of the credentials.
func Classify(line []byte) (agent.Event, error) {
	if len(line) > MaxEventBytes || !agent.EventObject(line) {
		return agent.Event{}, errMalformedEvent
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil || h.Type == "" {
		return agent.Event{}, errMalformedEvent
	}
	switch h.Type {
	case "system":
		if h.Subtype == "" {
			return agent.Event{}, errMalformedEvent
		}
		if h.Subtype == "api_retry" && authRefused(line) {
			return agent.Event{Kind: kindAuthRefused}, nil
		}
		return agent.Event{Kind: "system/" + h.Subtype}, nil
	case "result":
		var r result
		if json.Unmarshal(line, &r) != nil || r.IsError == nil || h.Subtype == "" {
			return agent.Event{}, errMalformedEvent
		}
		if h.Subtype == "success" && !*r.IsError {
			ev := agent.Event{Kind: kindResultSuccess}
			if len(r.Structured) > 0 && !bytes.Equal(r.Structured, []byte("null")) {
				ev.Final = bytes.Clone(r.Structured)
			}
			return ev, nil
		}
		if h.Subtype == "success" || agent.OneOf(h.Subtype, resultErrorSubtypes) {
			return agent.Event{Kind: kindResultError}, nil
		}
		return agent.Event{Kind: "result/" + h.Subtype}, nil
	case "user":
		return agent.Event{Kind: "user", Diagnostics: toolErrors(line)}, nil
	case "assistant":
		if authFailed(line) {
			return agent.Event{Kind: kindAuthRefused}, nil
		}
	}
	return agent.Event{Kind: h.Type}, nil
}

// authFailed reports whether an assistant message is Claude Code's
// synthetic answer to a refused or missing credential (its "error" member
// is authentication_failed: "Not logged in", "Invalid API key").
func authFailed(line []byte) bool {
	var a struct {
		Error json.RawMessage `json:"error"`
	}
	var msg string
	return json.Unmarshal(line, &a) == nil && json.Unmarshal(a.Error, &msg) == nil && msg == "authentication_failed"
}

// authRefused reports whether a system/api_retry line is a retry after the
// provider refused the credentials.
func authRefused(line []byte) bool {
	var r retry
	if json.Unmarshal(line, &r) != nil {
		return false
	}
	var msg string
	var status int
	return json.Unmarshal(r.Error, &msg) == nil && msg == "authentication_failed" ||
		json.Unmarshal(r.ErrorStatus, &status) == nil && (status == 401 || status == 403)
}

// toolErrors counts the tool_result blocks of a user message marked
// is_error (a failed edit, a refused path): the model sees them and goes
// on, so they never decide the outcome.
func toolErrors(line []byte) int {
	var u userMessage
	if json.Unmarshal(line, &u) != nil {
		return 0
	}
	var blocks []struct {
		Type    string `json:"type"`
		IsError bool   `json:"is_error"`
	}
	if json.Unmarshal(u.Message.Content, &blocks) != nil {
		return 0 // a plain string content holds no tool result
	}
	n := 0
	for _, b := range blocks {
		if b.Type == "tool_result" && b.IsError {
			n++
		}
	}
	return n
}

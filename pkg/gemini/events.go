package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// MaxEventBytes bounds one event line (without its LF).
const MaxEventBytes = agent.DefaultMaxLineBytes

// errMalformedEvent is returned by a classifier for any line it rejects.
var errMalformedEvent = errors.New("gemini: malformed event")

// Completion-table kinds.
const (
	kindInit          = "init"
	kindUser          = "message/user"
	kindAssistant     = "message/assistant"
	kindToolUse       = "tool_use"
	kindToolSuccess   = "tool_result/success"
	kindToolError     = "tool_result/error"
	kindWarning       = "error/warning"
	kindError         = "error/error"
	kindResultSuccess = "result/success"
	kindResultError   = "result/error"
	kindAuthRefused   = "auth/refused" // a result/error for an API answer 401 or 403
)

// Rules is Gemini CLI's closed completion table for `gemini -p ""
// --output-format stream-json` (0.61.0, events captured in
// testdata/events): init begins the session; the final result completes
// it when its status is success and fails it otherwise; nothing may follow
// it. The prompt echoed as a user message, the model's text (assistant
// message deltas) and tool calls are known; a tool result with status
// error and an error event (a warning, or the error that precedes a failed
// result) are diagnostics. A failed result for an API answer 401 or 403
// stops the run as a misconfiguration. Any other type, role, status or
// severity fails the run closed.
//
// Gemini CLI retries a 429 or 5xx answer, a request it could not send and
// a stream that broke with a connection reset or timeout on its own,
// writing nothing to the stream; a stream the server closed mid-way (what
// a cut behind the Worker's gateway looks like: "terminated") ends the run
// with a failed result, which the Worker retries as plugin_failed.
func Rules() agent.Rules {
	return agent.Rules{
		kindInit:          {Effect: agent.Begin},
		kindUser:          {Effect: agent.Known},
		kindAssistant:     {Effect: agent.Known},
		kindToolUse:       {Effect: agent.Known},
		kindToolSuccess:   {Effect: agent.Known},
		kindToolError:     {Effect: agent.Diagnostic},
		kindWarning:       {Effect: agent.Diagnostic},
		kindError:         {Effect: agent.Diagnostic},
		kindResultSuccess: {Effect: agent.Complete},
		kindResultError:   {Effect: agent.Fail},
		kindAuthRefused:   {Effect: agent.Refused},
	}
}

// event is the part of a stream-json line the adapter reads. Members it
// acts on must have their documented types.
type event struct {
	Type     string          `json:"type"`
	Role     *string         `json:"role"`
	Content  *string         `json:"content"`
	Status   *string         `json:"status"`
	Severity *string         `json:"severity"`
	Error    json.RawMessage `json:"error"`
}

// Stream reads one run's event lines. Its zero value is ready; one Stream
// serves one run (it keeps the model's text since its last tool call,
// which the final result completes as the answer).
type Stream struct {
	answer   []byte
	overflow bool // the text grew past agent.FinalMessageBytes: no answer
}

// Classify reads one stream-json line into its completion-table kind. The
// line must be at most MaxEventBytes of valid UTF-8 holding one JSON
// object with unique top-level keys and a non-empty string "type"; a
// message needs a string role and content, a tool result, error or result
// a string status or severity. The model's text since the last tool call
// (assistant message deltas, concatenated) is the structured answer the
// successful result carries, trimmed of surrounding white space; a failed
// result whose error is the API's 401 or 403 is a refusal of the
// credentials.
func (s *Stream) Classify(line []byte) (agent.Event, error) {
	if len(line) > MaxEventBytes || !agent.EventObject(line) {
		return agent.Event{}, errMalformedEvent
	}
	var e event
	if err := json.Unmarshal(line, &e); err != nil || e.Type == "" {
		return agent.Event{}, errMalformedEvent
	}
	field := func(p *string) (string, error) {
		if p == nil {
			return "", errMalformedEvent
		}
		return *p, nil
	}
	switch e.Type {
	case "message":
		role, err := field(e.Role)
		if err != nil || e.Content == nil {
			return agent.Event{}, errMalformedEvent
		}
		if role == "assistant" {
			s.add(*e.Content)
		}
		return agent.Event{Kind: "message/" + role}, nil
	case "tool_use":
		s.answer, s.overflow = s.answer[:0], false
		return agent.Event{Kind: kindToolUse}, nil
	case "tool_result", "result":
		status, err := field(e.Status)
		if err != nil {
			return agent.Event{}, errMalformedEvent
		}
		if e.Type == "result" && status == "success" {
			ev := agent.Event{Kind: kindResultSuccess}
			if a := bytes.TrimSpace(s.answer); len(a) > 0 && !s.overflow {
				ev.Final = bytes.Clone(a)
			}
			return ev, nil
		}
		if e.Type == "result" && status == "error" && refused(e.Error) {
			return agent.Event{Kind: kindAuthRefused}, nil
		}
		return agent.Event{Kind: e.Type + "/" + status}, nil
	case "error":
		severity, err := field(e.Severity)
		if err != nil {
			return agent.Event{}, errMalformedEvent
		}
		return agent.Event{Kind: "error/" + severity}, nil
	}
	return agent.Event{Kind: e.Type}, nil
}

// add appends model text to the answer, bounded.
func (s *Stream) add(text string) {
	if s.overflow || len(s.answer)+len(text) > agent.FinalMessageBytes {
		s.answer, s.overflow = s.answer[:0], true
		return
	}
	s.answer = append(s.answer, text...)
}

// apiErrorPrefix leads the message of a failed result that carries the
// API's error body ("[API Error: {...}]").
const apiErrorPrefix = "[API Error: "

// refused reports whether a failed result's error is the API's answer 401
// (UNAUTHENTICATED) or 403 (PERMISSION_DENIED): its message is the API's
// error body, {"error":{"code":401,"status":"UNAUTHENTICATED",...}}.
func refused(raw json.RawMessage) bool {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return false
	}
	body, prefixed := strings.CutPrefix(e.Message, apiErrorPrefix)
	body, suffixed := strings.CutSuffix(body, "]")
	if !prefixed || !suffixed {
		return false
	}
	var api struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &api) != nil {
		return false
	}
	switch api.Error.Code {
	case 401, 403:
		return true
	}
	return false
}

package codex

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEventType(t *testing.T) {
	tests := []struct {
		line string
		typ  string // "" means rejected
	}{
		{`{"type":"thread.started","thread_id":"abc"}`, EventThreadStarted},
		{`{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":2}}`, EventTurnCompleted},
		{`{"item":{"id":"i","type":"command_execution","exit_code":null},"type":"item.updated"}`, EventItemUpdated},
		{` {"type":"error","message":"x"} `, EventError},
		{`{"type":"thread.mystery","x":[1,{"y":null}]}`, "thread.mystery"},
		{`{"item":{"type":"a","type":"b"},"type":"item.started"}`, EventItemStarted}, // nested keys are not interpreted
		{``, ""},
		{`not json`, ""},
		{`[]`, ""},
		{`"turn.completed"`, ""},
		{`{}`, ""},
		{`{"type":""}`, ""},
		{`{"type":null}`, ""},
		{`{"type":1}`, ""},
		{`{"type":["turn.completed"]}`, ""},
		{`{"type":"turn.started","type":"turn.completed"}`, ""},
		{`{"type":"turn.completed"}{"type":"turn.completed"}`, ""},
		{`{"type":"turn.completed"`, ""},
		{"{\"type\":\"turn.completed\",\"x\":\"\xff\"}", ""},
		{`{"type":"turn.completed","x":}`, ""},
	}
	for _, tc := range tests {
		typ, err := EventType([]byte(tc.line))
		if tc.typ == "" {
			if err == nil || typ != "" {
				t.Errorf("%q: accepted as %q", tc.line, typ)
			}
			continue
		}
		if err != nil || typ != tc.typ {
			t.Errorf("%q: got %q, %v; want %q", tc.line, typ, err, tc.typ)
		}
	}
	big := `{"type":"item.updated","t":"` + strings.Repeat("x", MaxEventBytes) + `"}`
	if _, err := EventType([]byte(big)); err == nil {
		t.Error("an event over MaxEventBytes was accepted")
	}
}

func observeAll(lines ...string) *Stream {
	var s Stream
	for _, l := range lines {
		s.Observe([]byte(l))
	}
	return &s
}

func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestStreamVerdict(t *testing.T) {
	const (
		started   = `{"type":"thread.started","thread_id":"t"}`
		turn      = `{"type":"turn.started"}`
		item      = `{"type":"item.completed","item":{"id":"1","type":"agent_message","text":"{}"}}`
		completed = `{"type":"turn.completed","usage":{}}`
		failed    = `{"type":"turn.failed","error":{"message":"m"}}`
		errorEv   = `{"type":"error","message":"m"}`
		errorItem = `{"type":"item.completed","item":{"id":"0","type":"error","message":"m"}}`
		unknown   = `{"type":"turn.mystery"}`
	)
	tests := []struct {
		name    string
		lines   []string
		reason  Reason // "" = success
		unknown int
	}{
		{"retried error then completion", []string{started, turn, errorEv, completed}, "", 0},
		{"error item then completion", []string{started, errorItem, turn, completed}, "", 0},
		{"error event without completion", []string{started, turn, errorEv}, ReasonNoCompletion, 0},
		{"error event then turn failed", []string{started, turn, errorEv, failed}, ReasonProviderFailed, 0},
		{"complete", []string{started, turn, item, completed}, "", 0},
		{"duplicate completion", []string{started, turn, completed, completed}, "", 0},
		{"unknown events are ignored", []string{started, unknown, turn, unknown, completed}, "", 2},
		{"unknown event cannot complete", []string{started, turn, unknown}, ReasonNoCompletion, 1},
		{"no completion", []string{started, turn, item}, ReasonNoCompletion, 0},
		{"empty", nil, ReasonNoCompletion, 0},
		{"turn failed", []string{started, turn, failed}, ReasonProviderFailed, 0},
		{"late failure after completion", []string{started, turn, completed, failed}, ReasonProviderFailed, 0},
		{"malformed line", []string{started, turn, "garbage", completed}, ReasonMalformedEvents, 0},
		{"nothing believed after a malformed line", []string{started, "garbage", unknown, completed}, ReasonMalformedEvents, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := observeAll(tc.lines...)
			if got := reasonOf(s.Verdict()); got != tc.reason {
				t.Fatalf("verdict %q, want %q", got, tc.reason)
			}
			if s.Unknown != tc.unknown {
				t.Fatalf("unknown %d, want %d", s.Unknown, tc.unknown)
			}
		})
	}
}

// TestStreamVerdictOnCapturedEvents replays event streams captured from
// the real codex-cli 0.169.0 against the fake Responses API
// (testdata/fake-responses): a stream cut once and retried, a missing
// model-metadata error item, and a provider answering 400.
func TestStreamVerdictOnCapturedEvents(t *testing.T) {
	tests := []struct {
		file               string
		reason             Reason
		errors, errorItems int
	}{
		{"completed.jsonl", "", 0, 0},
		{"retried-stream-completed.jsonl", "", 1, 0},
		{"error-item-completed.jsonl", "", 0, 1},
		{"provider-400-failed.jsonl", ReasonProviderFailed, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "events", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			s := observeAll(lines...)
			if got := reasonOf(s.Verdict()); got != tc.reason {
				t.Fatalf("verdict %q, want %q", got, tc.reason)
			}
			if s.Errors != tc.errors || s.ErrorItems != tc.errorItems || s.Unknown != 0 {
				t.Fatalf("errors %d, error items %d, unknown %d; want %d, %d, 0",
					s.Errors, s.ErrorItems, s.Unknown, tc.errors, tc.errorItems)
			}
			// A cut anywhere before the completion leaves no completed turn.
			if tc.reason == "" {
				last := len(lines) - 1
				if !strings.Contains(lines[last], `"turn.completed"`) {
					t.Fatal("capture does not end with turn.completed")
				}
				if got := reasonOf(observeAll(lines[:last]...).Verdict()); got != ReasonNoCompletion {
					t.Fatalf("truncated stream: verdict %q", got)
				}
				broken := append(append([]string{}, lines[:last]...), lines[last][:len(lines[last])/2])
				if got := reasonOf(observeAll(broken...).Verdict()); got != ReasonMalformedEvents {
					t.Fatalf("half a completion line: verdict %q", got)
				}
			}
		})
	}
}

func TestObserveReportsOnlyTheFirstTurn(t *testing.T) {
	var s Stream
	if s.Observe([]byte(`{"type":"thread.started"}`)) {
		t.Fatal("thread.started is not a turn")
	}
	if !s.Observe([]byte(`{"type":"turn.started"}`)) {
		t.Fatal("first turn.started not reported")
	}
	if s.Observe([]byte(`{"type":"turn.started"}`)) {
		t.Fatal("second turn.started reported")
	}
}

// FuzzEventType: never panics; an accepted line has a non-empty type and
// is a complete JSON object; errors carry no value.
func FuzzEventType(f *testing.F) {
	f.Add([]byte(`{"type":"turn.completed","usage":{"input_tokens":1}}`))
	f.Add([]byte(`{"type":"item.updated","item":{"exit_code":null}}`))
	f.Add([]byte(`{"type":"a","type":"b"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		typ, err := EventType(line)
		if err != nil {
			if typ != "" || err.Error() != errMalformedEvent.Error() {
				t.Fatalf("rejection returned %q / %v", typ, err)
			}
			return
		}
		if typ == "" {
			t.Fatal("accepted an event without a type")
		}
		var s Stream
		s.Observe(line)
		if s.Malformed || s.Events != 1 {
			t.Fatal("Observe disagrees with EventType")
		}
	})
}

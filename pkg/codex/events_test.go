package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
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

func observeAll(lines ...string) *agent.Verdict {
	var v agent.Verdict
	rules := Rules()
	for _, l := range lines {
		ev, err := Classify([]byte(l))
		if err != nil {
			v.Malformed = true
			continue
		}
		v.Observe(rules, ev)
	}
	return &v
}

// TestStreamVerdict is Codex's closed completion table: one turn, started
// then completed, nothing but listed diagnostics around it, nothing after
// it (issue 29: a second turn.started, an unknown event after the
// completion, a completion without a start and an error after the
// completion all passed before).
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
		name        string
		lines       []string
		reason      agent.Reason // "" = success
		diagnostics int
	}{
		{"retried error then completion", []string{started, turn, errorEv, completed}, "", 1},
		{"error item then completion", []string{started, errorItem, turn, completed}, "", 1},
		{"complete", []string{started, turn, item, completed}, "", 0},
		{"error event without completion", []string{started, turn, errorEv}, agent.ReasonNoCompletion, 1},
		{"error event then turn failed", []string{started, turn, errorEv, failed}, agent.ReasonProviderFailed, 1},
		{"no completion", []string{started, turn, item}, agent.ReasonNoCompletion, 0},
		{"empty", nil, agent.ReasonNoCompletion, 0},
		{"turn failed", []string{started, turn, failed}, agent.ReasonProviderFailed, 0},
		{"second turn never completes", []string{started, turn, completed, turn}, agent.ReasonUnexpectedEvent, 0},
		{"second turn completes", []string{started, turn, completed, turn, completed}, agent.ReasonUnexpectedEvent, 0},
		{"unknown event after completion", []string{started, turn, completed, unknown}, agent.ReasonUnexpectedEvent, 0},
		{"unknown event before completion", []string{started, unknown, turn, completed}, agent.ReasonUnexpectedEvent, 0},
		{"completion without a turn", []string{started, completed}, agent.ReasonUnexpectedEvent, 0},
		{"error after completion", []string{started, turn, completed, errorEv}, agent.ReasonUnexpectedEvent, 0},
		{"item after completion", []string{started, turn, completed, item}, agent.ReasonUnexpectedEvent, 0},
		{"duplicate completion", []string{started, turn, completed, completed}, agent.ReasonUnexpectedEvent, 0},
		{"late failure after completion", []string{started, turn, completed, failed}, agent.ReasonUnexpectedEvent, 0},
		{"refused credentials retried", []string{started, turn, `{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: bad key)"}`}, agent.ReasonAuthRefused, 0},
		{"refused credentials failed the turn", []string{started, turn, `{"type":"turn.failed","error":{"message":"unexpected status 403 Forbidden: no"}}`}, agent.ReasonAuthRefused, 0},
		{"a 500 is a diagnostic", []string{started, turn, `{"type":"error","message":"Reconnecting... 1/5 (unexpected status 500 Internal Server Error)"}`, completed}, "", 1},
		{"malformed line", []string{started, turn, "garbage", completed}, agent.ReasonMalformedEvents, 0},
		{"nothing believed after a malformed line", []string{started, "garbage", turn, completed}, agent.ReasonMalformedEvents, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := observeAll(tc.lines...)
			if got := v.Reason(); got != tc.reason {
				t.Fatalf("verdict %q, want %q", got, tc.reason)
			}
			if v.Diagnostics != tc.diagnostics {
				t.Fatalf("diagnostics %d, want %d", v.Diagnostics, tc.diagnostics)
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
		file        string
		reason      agent.Reason
		diagnostics int
	}{
		{"completed.jsonl", "", 0},
		{"retried-stream-completed.jsonl", "", 1},
		{"error-item-completed.jsonl", "", 1},
		{"provider-400-failed.jsonl", agent.ReasonProviderFailed, 1},
		{"provider-401-refused.jsonl", agent.ReasonAuthRefused, 0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "events", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			v := observeAll(lines...)
			if got := v.Reason(); got != tc.reason {
				t.Fatalf("verdict %q, want %q", got, tc.reason)
			}
			if v.Diagnostics != tc.diagnostics {
				t.Fatalf("diagnostics %d, want %d", v.Diagnostics, tc.diagnostics)
			}
			// A cut anywhere before the completion leaves no completed turn.
			if tc.reason == "" {
				last := len(lines) - 1
				if !strings.Contains(lines[last], `"turn.completed"`) {
					t.Fatal("capture does not end with turn.completed")
				}
				if got := observeAll(lines[:last]...).Reason(); got != agent.ReasonNoCompletion {
					t.Fatalf("truncated stream: verdict %q", got)
				}
				broken := append(append([]string{}, lines[:last]...), lines[last][:len(lines[last])/2])
				if got := observeAll(broken...).Reason(); got != agent.ReasonMalformedEvents {
					t.Fatalf("half a completion line: verdict %q", got)
				}
			}
		})
	}
}

func TestObserveReportsOnlyTheFirstTurn(t *testing.T) {
	var v agent.Verdict
	rules := Rules()
	obs := func(l string) (bool, bool) {
		ev, err := Classify([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		return v.Observe(rules, ev)
	}
	if first, _ := obs(`{"type":"thread.started"}`); first {
		t.Fatal("thread.started is not a turn")
	}
	if first, _ := obs(`{"type":"turn.started"}`); !first {
		t.Fatal("first turn.started not reported")
	}
	if first, stop := obs(`{"type":"turn.started"}`); first || !stop {
		t.Fatal("a second turn.started must stop the run, not start one")
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
		ev, err := Classify(line)
		if err != nil || ev.Kind == "" {
			t.Fatal("Classify disagrees with EventType")
		}
	})
}

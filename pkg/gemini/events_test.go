package gemini

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

func observe(lines ...string) *agent.Verdict {
	var v agent.Verdict
	var st Stream
	rules := Rules()
	for _, l := range lines {
		ev, err := st.Classify([]byte(l))
		if err != nil {
			v.Malformed = true
			continue
		}
		v.Observe(rules, ev)
	}
	return &v
}

// TestVerdictOnCapturedEvents replays event streams captured from the
// real Gemini CLI 0.61.0 (gemini --prompt "" --output-format stream-json)
// against testdata/fake-gemini: a plain edit, a 503 retried by the CLI, a
// failed tool call, the API answering 401 and 403, a stream cut mid-way
// (the CLI gives up: a failed result) and a hung API (no result).
func TestVerdictOnCapturedEvents(t *testing.T) {
	tests := []struct {
		file        string
		reason      agent.Reason
		diagnostics int
		final       string
	}{
		{"completed.jsonl", "", 0, `{"commit_subject":"feat: add a.txt"}`},
		{"unavailable-retried-completed.jsonl", "", 0, `{"commit_subject":"feat: add a.txt"}`},
		{"tool-error-completed.jsonl", "", 1, `{"commit_subject":"feat: add a.txt"}`},
		{"auth-refused-401.jsonl", agent.ReasonAuthRefused, 0, ""},
		{"auth-refused-403.jsonl", agent.ReasonAuthRefused, 0, ""},
		{"cut-stream-failed.jsonl", agent.ReasonProviderFailed, 0, ""},
		{"hang-no-result.jsonl", agent.ReasonNoCompletion, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "events", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			v := observe(strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
			if got := v.Reason(); got != tc.reason {
				t.Fatalf("verdict %q, want %q", got, tc.reason)
			}
			if v.Diagnostics != tc.diagnostics || string(v.Final) != tc.final {
				t.Fatalf("diagnostics %d, final %s; want %d, %s", v.Diagnostics, v.Final, tc.diagnostics, tc.final)
			}
		})
	}
}

// The answer is the text since the last tool call; a result after a tool
// call without text carries none.
func TestAnswerIsTheTextAfterTheLastToolCall(t *testing.T) {
	v := observe(`{"type":"init","model":"m"}`,
		`{"type":"message","role":"assistant","content":"{\"commit_subject\":\"early\"}","delta":true}`,
		`{"type":"tool_use","tool_name":"write_file","tool_id":"t","parameters":{}}`,
		`{"type":"tool_result","tool_id":"t","status":"success"}`,
		`{"type":"message","role":"assistant","content":"  {\"commit_subject\":","delta":true}`,
		`{"type":"message","role":"assistant","content":"\"late\"}\n","delta":true}`,
		`{"type":"result","status":"success","stats":{}}`)
	if v.Reason() != "" || string(v.Final) != `{"commit_subject":"late"}` {
		t.Fatalf("%q, final %s", v.Reason(), v.Final)
	}
	v = observe(`{"type":"init","model":"m"}`,
		`{"type":"message","role":"assistant","content":"{}","delta":true}`,
		`{"type":"tool_use","tool_name":"write_file","tool_id":"t","parameters":{}}`,
		`{"type":"result","status":"success","stats":{}}`)
	if v.Reason() != "" || v.Final != nil {
		t.Fatalf("%q, final %s", v.Reason(), v.Final)
	}
	// Text past the final message bound is no answer at all.
	long := strings.Repeat("x", agent.FinalMessageBytes/2+1)
	v = observe(`{"type":"init","model":"m"}`,
		`{"type":"message","role":"assistant","content":"`+long+`","delta":true}`,
		`{"type":"message","role":"assistant","content":"`+long+`","delta":true}`,
		`{"type":"message","role":"assistant","content":"{}","delta":true}`,
		`{"type":"result","status":"success","stats":{}}`)
	if v.Reason() != "" || v.Final != nil {
		t.Fatalf("%q, final of %d bytes", v.Reason(), len(v.Final))
	}
}

func TestClassifyFailsClosed(t *testing.T) {
	begin := `{"type":"init","model":"m"}`
	for name, line := range map[string]string{
		"not json":           `not an event`,
		"array":              `[{"type":"init"}]`,
		"no type":            `{"role":"assistant","content":"x"}`,
		"type not a string":  `{"type":1}`,
		"duplicate type":     `{"type":"init","type":"result"}`,
		"message no role":    `{"type":"message","content":"x"}`,
		"message no content": `{"type":"message","role":"assistant"}`,
		"role not a string":  `{"type":"message","role":1,"content":"x"}`,
		"result no status":   `{"type":"result","stats":{}}`,
		"error no severity":  `{"type":"error","message":"x"}`,
		"invalid utf-8":      "{\"type\":\"init\",\"model\":\"\xff\"}",
	} {
		t.Run(name, func(t *testing.T) {
			if v := observe(begin, line); v.Reason() != agent.ReasonMalformedEvents {
				t.Fatalf("verdict %q", v.Reason())
			}
		})
	}
	for name, line := range map[string]string{
		"unknown type":     `{"type":"mystery"}`,
		"unknown role":     `{"type":"message","role":"system","content":"x"}`,
		"unknown status":   `{"type":"tool_result","tool_id":"t","status":"pending"}`,
		"unknown severity": `{"type":"error","severity":"fatal","message":"x"}`,
		"second init":      begin,
	} {
		t.Run(name, func(t *testing.T) {
			if v := observe(begin, line, `{"type":"result","status":"success","stats":{}}`); v.Reason() != agent.ReasonUnexpectedEvent {
				t.Fatalf("verdict %q", v.Reason())
			}
		})
	}
	if v := observe(begin, `{"type":"result","status":"success","stats":{}}`, `{"type":"message","role":"assistant","content":"x","delta":true}`); v.Reason() != agent.ReasonUnexpectedEvent {
		t.Fatalf("event after the result: %q", v.Reason())
	}
	if v := observe(`{"type":"result","status":"success","stats":{}}`); v.Reason() != agent.ReasonUnexpectedEvent {
		t.Fatalf("result without init: %q", v.Reason())
	}
}

// Only the API's own 401 and 403 bodies are refusals; other failed
// results (a 400, a gateway refusal without a numeric code, a cut) fail.
func TestRefusedIsTheAPIAnswer401Or403(t *testing.T) {
	for msg, want := range map[string]bool{
		`[API Error: {\"error\":{\"code\":401,\"message\":\"x\",\"status\":\"UNAUTHENTICATED\"}}]`:   true,
		`[API Error: {\"error\":{\"code\":403,\"message\":\"x\",\"status\":\"PERMISSION_DENIED\"}}]`: true,
		`[API Error: {\"error\":{\"code\":400,\"message\":\"x\",\"status\":\"INVALID_ARGUMENT\"}}]`:  false,
		`[API Error: {\"error\":{\"code\":\"budget_exceeded\",\"message\":\"x\"}}]`:                  false,
		`[API Error: terminated]`:                false,
		`{\"error\":{\"code\":401}}`:             false,
		`[API Error: {\"error\":{\"code\":401}}`: false,
	} {
		v := observe(`{"type":"init","model":"m"}`, `{"type":"result","status":"error","error":{"type":"unknown","message":"`+msg+`"},"stats":{}}`)
		if got := v.Reason() == agent.ReasonAuthRefused; got != want {
			t.Errorf("%s: refused %v (%q)", msg, got, v.Reason())
		}
	}
}

func FuzzClassify(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join("testdata", "events"))
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join("testdata", "events", e.Name()))
		for _, l := range strings.Split(string(data), "\n") {
			f.Add([]byte(l))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var st Stream
		ev, err := st.Classify(line)
		if err != nil {
			return
		}
		if ev.Kind == "" || ev.Final != nil && ev.Kind != kindResultSuccess {
			t.Fatalf("kind %q, final %q for %q", ev.Kind, ev.Final, line)
		}
		if len(ev.Final) > agent.FinalMessageBytes {
			t.Fatalf("final of %d bytes", len(ev.Final))
		}
	})
}

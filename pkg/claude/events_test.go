package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

func observe(lines ...string) *agent.Verdict {
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

// TestVerdictOnCapturedEvents replays event streams captured from the
// real Claude Code 2.1.328 (claude -p --output-format stream-json
// --verbose) against testdata/fake-anthropic: a plain edit, a stream cut
// once and retried, a failed tool call, an edit outside the workspace
// refused by --restricted, a provider answering 401, and a run without a
// key ("Not logged in").
func TestVerdictOnCapturedEvents(t *testing.T) {
	tests := []struct {
		file        string
		reason      agent.Reason
		diagnostics int
		final       string
	}{
		{"completed.jsonl", "", 0, `{"commit_subject":"feat: add hello.txt"}`},
		{"retried-stream-completed.jsonl", "", 1, `{"commit_subject":"feat: add hello.txt"}`},
		{"tool-error-completed.jsonl", "", 1, `{"commit_subject":"feat: add hello.txt"}`},
		{"permission-denied-completed.jsonl", "", 2, `{"commit_subject":"feat: add hello.txt"}`},
		{"auth-refused.jsonl", agent.ReasonAuthRefused, 0, ""},
		{"not-logged-in.jsonl", agent.ReasonAuthRefused, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "events", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			v := observe(lines...)
			if got := v.Reason(); got != tc.reason {
				t.Fatalf("verdict %q, want %q", got, tc.reason)
			}
			if v.Diagnostics != tc.diagnostics || string(v.Final) != tc.final {
				t.Fatalf("diagnostics %d, final %s; want %d, %s", v.Diagnostics, v.Final, tc.diagnostics, tc.final)
			}
			if tc.reason != "" {
				return
			}
			last := len(lines) - 1
			if !strings.Contains(lines[last], `"type":"result"`) {
				t.Fatal("capture does not end with the result")
			}
			if got := observe(lines[:last]...).Reason(); got != agent.ReasonNoCompletion {
				t.Fatalf("without the result: %q", got)
			}
			if got := observe(append(lines, lines[last-1])...).Reason(); got != agent.ReasonUnexpectedEvent {
				t.Fatalf("an event after the result: %q", got)
			}
			if got := observe(append(lines[:last:last], lines[last][:len(lines[last])/2])...).Reason(); got != agent.ReasonMalformedEvents {
				t.Fatalf("half a result line: %q", got)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		line string
		kind string // "" = rejected
		diag int
	}{
		{`{"type":"system","subtype":"init","cwd":"/w"}`, "system/init", 0},
		{`{"type":"system","subtype":"api_retry","error_status":529,"error":"overloaded"}`, "system/api_retry", 0},
		{`{"type":"system","subtype":"api_retry","error_status":null,"error":"authentication_failed"}`, kindAuthRefused, 0},
		{`{"type":"system","subtype":"api_retry","error_status":403,"error":"unknown"}`, kindAuthRefused, 0},
		{`{"type":"result","subtype":"success","is_error":false,"structured_output":{"a":1}}`, kindResultSuccess, 0},
		{`{"type":"result","subtype":"success","is_error":true}`, kindResultError, 0},
		{`{"type":"result","subtype":"error_max_turns","is_error":true}`, kindResultError, 0},
		{`{"type":"result","subtype":"brand_new","is_error":false}`, "result/brand_new", 0},
		{`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","is_error":true},{"type":"tool_result"}]}}`, "user", 1},
		{`{"type":"user","message":{"role":"user","content":"plain"}}`, "user", 0},
		{`{"type":"mystery"}`, "mystery", 0},
		{`{"type":"assistant","error":"authentication_failed","message":{"content":[]}}`, kindAuthRefused, 0},
		{`{"type":"assistant","error":"rate_limit","message":{"content":[]}}`, "assistant", 0},
		{`{"type":"result","subtype":"success"}`, "", 0},
		{`{"type":"result","subtype":"success","is_error":"no"}`, "", 0},
		{`{"type":"system"}`, "", 0},
		{`{"type":"system","subtype":"init","subtype":"api_retry"}`, "", 0},
		{`{"type":""}`, "", 0},
		{`[]`, "", 0},
		{`not json`, "", 0},
		{"{\"type\":\"user\",\"x\":\"\xff\"}", "", 0},
		{`{"type":"user"}{}`, "", 0},
	}
	for _, tc := range tests {
		ev, err := Classify([]byte(tc.line))
		if tc.kind == "" {
			if err == nil {
				t.Errorf("%q accepted as %q", tc.line, ev.Kind)
			}
			continue
		}
		if err != nil || ev.Kind != tc.kind || ev.Diagnostics != tc.diag {
			t.Errorf("%q: %+v, %v; want %q with %d diagnostics", tc.line, ev, err, tc.kind, tc.diag)
		}
	}
}

// FuzzClassify: never panics; a rejection returns nothing and the fixed
// error; an accepted line has a kind, and only a successful result carries
// a final answer.
func FuzzClassify(f *testing.F) {
	for _, name := range []string{"completed.jsonl", "auth-refused.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", "events", name))
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f.Add([]byte(l))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := Classify(line)
		if err != nil {
			if ev.Kind != "" || ev.Final != nil || err != errMalformedEvent {
				t.Fatalf("rejection returned %+v / %v", ev, err)
			}
			return
		}
		if ev.Kind == "" || (ev.Final != nil && ev.Kind != kindResultSuccess) {
			t.Fatalf("accepted %+v", ev)
		}
	})
}

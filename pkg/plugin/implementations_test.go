package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The shipped plugins (the Go reference plugin and the Python example) are
// run as real processes and judged with this package's own rules.

// implementations builds the reference plugin and returns the argv of each
// shipped implementation.
func implementations(t *testing.T) map[string][]string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "forge-ref-plugin")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/forge-ref-plugin")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build reference plugin: %v", err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is required to test examples/forge-plugin-v1.py")
	}
	script, err := filepath.Abs("../../examples/forge-plugin-v1.py")
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]string{"go": {bin}, "python": {py, script}}
}

// processBound is a safety net against hangs, not a timing assertion.
const processBound = 20 * time.Second

// runFixed feeds stdin to a fresh plugin process, closes it, and returns
// stdout and whether the process exited 0.
func runFixed(t *testing.T, argv []string, stdin string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), processBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run plugin: %v", err)
	}
	return out.String(), err == nil
}

const limitsJSON = `{"frame_bytes":1048576,"progress_frames":128,"text_bytes":65536,"progress_text_bytes":1024,"commit_subject_bytes":256}`

func initializeLine(caps ...string) string {
	return `{"version":"v1","id":"` + testID + `","type":"initialize","capabilities":["` + strings.Join(caps, `","`) + `"],"limits":` + limitsJSON + "}\n"
}

func TestImplementationsValidSession(t *testing.T) {
	offers := [][]Capability{
		{CapText},
		{CapText, CapProgress, CapCancel, CapWorkspaceEdit, CapCommitSubject, CapAgentReport},
		{CapAgentReport, CapCancel, CapProgress, CapText},
	}
	inputs := map[string]string{"ascii": "hello", "empty": "", "unicode": "grüße, ǆ"}
	for name, argv := range implementations(t) {
		for _, offer := range offers {
			for inName, input := range inputs {
				t.Run(name+"/"+inName, func(t *testing.T) {
					out := runSession(t, argv, offer, input)
					if out != strings.ToUpper(input) && !(name == "python" && out == "GRÜSSE, Ǆ") {
						t.Fatalf("output = %q", out)
					}
				})
			}
		}
	}
}

// runSession runs one interactive session, judging every plugin frame with
// a Session, and returns the text output.
func runSession(t *testing.T, argv []string, offer []Capability, input string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), processBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	stdout := bufio.NewReader(stdoutPipe)
	s, _ := NewSession(testID)
	send := func(f Frame) {
		if err := s.Accept(f); err != nil {
			t.Fatal(err)
		}
		if err := WriteFrame(stdin, f); err != nil {
			t.Fatal(err)
		}
	}
	receive := func() Frame {
		line, err := ReadFrame(stdout)
		if err != nil {
			t.Fatalf("read plugin frame: %v", err)
		}
		f, err := DecodeFrame(line)
		if err == nil {
			err = s.Accept(f)
		}
		if err != nil {
			t.Fatalf("plugin frame: %v", err)
		}
		return f
	}
	send(Frame{ID: testID, Type: TypeInitialize, Capabilities: offer, Limits: V1Limits()})
	receive()
	if !s.Negotiated(CapText) {
		t.Fatal("text not selected")
	}
	send(Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: input})
	var last Frame
	for !s.Done() {
		last = receive()
	}
	stdin.Close()
	if _, err := ReadFrame(stdout); err != io.EOF {
		t.Fatalf("stdout after the terminal frame: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("plugin exit: %v", err)
	}
	if last.Type != TypeResult {
		t.Fatalf("terminal %s", last.Type)
	}
	return *last.Output
}

// invalidCase is one fixed stdin that must end the plugin with a nonzero
// exit; stage says whether the bad frame is the first or the second frame.
type invalidCase struct {
	stage string // "initialize" or "execute"
	stdin string
}

func invalidCases(t *testing.T) []invalidCase {
	bad := []string{"", "\n", "{}", "{\"version\":\"v1\"}\r\n", strings.TrimSuffix(initializeLine("text"), "\n"),
		strings.TrimSuffix(initializeLine("text"), "\n") + "\r\n", strings.Replace(initializeLine("text"), ":", ": ", 1),
		"{\"version\":\"v1\",\"id\":\"\xc3\"}\n", `{"a":"` + strings.Repeat("x", FrameBytes) + "\"}\n",
		strings.Repeat("y", FrameBytes+10)}
	for _, line := range corpusLines(t, "invalid.ndjson") {
		bad = append(bad, string(line)+"\n")
	}
	// Valid frames that are wrong as the first or second frame.
	for _, line := range corpusLines(t, "valid.ndjson") {
		f := mustDecode(t, string(line))
		if f.Type != TypeInitialize && !(f.Type == TypeExecute && f.Operation == OpText) {
			bad = append(bad, string(line)+"\n")
		}
	}
	initLine := initializeLine("text", "progress")
	var cases []invalidCase
	for _, line := range bad {
		cases = append(cases, invalidCase{"initialize", line}, invalidCase{"execute", initLine + line})
	}
	return append(cases,
		invalidCase{"initialize", initializeLine("workspace_edit")},
		invalidCase{"initialize", initializeLine("progress")},
		invalidCase{"execute", initLine},
		invalidCase{"execute", initLine + initLine},
		invalidCase{"execute", initLine + strings.Replace(initLine, `"initialize"`, `"initialized"`, 1)},
		invalidCase{"execute", initLine + `{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + strings.Repeat("x", TextBytes+1) + "\"}\n"},
		invalidCase{"execute", initLine + `{"version":"v1","id":"fedcba9876543210fedcba9876543210","type":"execute","operation":"text","input":"x"}` + "\n"},
	)
}

// wantStdout is what a plugin may have written when it rejects the case:
// nothing for a bad initialize, exactly its initialized frame otherwise.
func (c invalidCase) wantStdout(initialized string) string {
	if c.stage == "initialize" {
		return ""
	}
	return initialized
}

func TestImplementationsRejectInvalidFrames(t *testing.T) {
	cases := invalidCases(t)
	if len(cases) < 200 {
		t.Fatalf("only %d cases", len(cases))
	}
	for name, argv := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			initialized, ok := runFixed(t, argv, initializeLine("text", "progress"))
			if ok || !strings.HasPrefix(initialized, `{"version":"v1","id":"`+testID+`","type":"initialized"`) {
				t.Fatalf("initialize alone: ok=%v stdout %q", ok, initialized)
			}
			for i, c := range cases {
				// Python starts slowly; every case runs in-process in
				// TestPythonExampleRejectsInvalidFrames, a sample here.
				if name == "python" && i%16 != 0 {
					continue
				}
				out, ok := runFixed(t, argv, c.stdin)
				if ok || out != c.wantStdout(initialized) {
					t.Errorf("case %d (%s): exit ok=%v stdout %.200q", i, c.stage, ok, out)
				}
			}
		})
	}
}

// pythonDriver loads the example as a module and runs its session function
// once per case (base64 stdin images as a JSON list on stdin), reporting
// whether each case ended cleanly and what it wrote.
const pythonDriver = `
import base64, importlib.util, io, json, sys
sys.dont_write_bytecode = True  # no __pycache__ next to the example
spec = importlib.util.spec_from_file_location("example", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
results = []
for case in json.load(sys.stdin):
    out = io.BytesIO()
    try:
        mod.session(io.BytesIO(base64.b64decode(case)), out)
        ok = True
    except mod.Invalid:
        ok = False
    results.append({"ok": ok, "stdout": base64.b64encode(out.getvalue()).decode()})
json.dump(results, sys.stdout)
`

func TestPythonExampleRejectsInvalidFrames(t *testing.T) {
	cases := invalidCases(t)
	argv := implementations(t)["python"]
	images := make([][]byte, len(cases))
	for i, c := range cases {
		images[i] = []byte(c.stdin)
	}
	input, err := json.Marshal(images)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), processBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], "-c", pythonDriver, argv[1])
	cmd.Stdin = bytes.NewReader(input)
	cmd.Stderr = os.Stderr
	output, err := cmd.Output()
	if err != nil {
		t.Fatalf("python driver: %v", err)
	}
	var results []struct {
		OK     bool   `json:"ok"`
		Stdout []byte `json:"stdout"`
	}
	if err := json.Unmarshal(output, &results); err != nil || len(results) != len(cases) {
		t.Fatalf("driver output: %v (%d results)", err, len(results))
	}
	initialized := `{"version":"v1","id":"` + testID + `","type":"initialized","capabilities":["text"]}` + "\n"
	for i, c := range cases {
		if r := results[i]; r.OK || string(r.Stdout) != c.wantStdout(initialized) {
			t.Errorf("case %d (%s) %.120q: ok=%v stdout %q", i, c.stage, c.stdin, r.OK, r.Stdout)
		}
	}
}

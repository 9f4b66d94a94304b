package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

const id = "0123456789abcdef0123456789abcdef"

func initLine(caps ...string) string {
	return `{"version":"v1","id":"` + id + `","type":"initialize","capabilities":["` + strings.Join(caps, `","`) +
		`"],"limits":{"frame_bytes":1048576,"progress_frames":128,"text_bytes":65536,"progress_text_bytes":1024,"commit_subject_bytes":256}}` + "\n"
}

func execLine(input string) string {
	return `{"version":"v1","id":"` + id + `","type":"execute","operation":"text","input":"` + input + "\"}\n"
}

func frame(typ, fields string) string {
	return `{"version":"v1","id":"` + id + `","type":"` + typ + `"` + fields + "}\n"
}

func TestVersionAndUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != buildinfo.Line("forge-ref-plugin")+"\n" {
		t.Fatalf("--version printed %q", got)
	}
	for _, args := range [][]string{{"--bogus"}, {"extra"}} {
		out.Reset()
		err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 || out.Len() != 0 {
			t.Fatalf("run(%v) = %v, stdout %q", args, err, out.String())
		}
	}
	if exitCode(nil) != 0 || exitCode(errors.New("x")) != 1 {
		t.Fatal("exit code mapping")
	}
}

// binary builds the plugin once per test into a temp dir.
func binary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "forge-ref-plugin")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build: %v", err)
	}
	return bin
}

// proc is the built plugin running with pipes.
type proc struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	err bytes.Buffer
}

func startProc(t *testing.T, bin string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(bin)}
	p.cmd.Env = []string{}
	p.cmd.Stderr = &p.err
	in, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	p.in, p.out = in, bufio.NewReader(out)
	return p
}

func (p *proc) send(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, s); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

func (p *proc) next() string {
	p.t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil {
		p.t.Fatalf("read: %v", err)
	}
	return line
}

// finish closes stdin and returns the remaining stdout and the exit code.
func (p *proc) finish() (string, int) {
	p.t.Helper()
	p.in.Close()
	rest, _ := io.ReadAll(p.out)
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(rest), 0
	case errors.As(err, &ee):
		return string(rest), ee.ExitCode()
	}
	p.t.Fatalf("wait: %v", err)
	return "", -1
}

func TestBinarySessions(t *testing.T) {
	bin := binary(t)
	big := strings.Repeat("ɐ", plugin.TextBytes/2) // 65,536 bytes that upper-case to 98,304
	cases := []struct {
		name   string
		offer  []string
		input  string
		frames []string
	}{
		{"plain", []string{"text"}, "hello, wörld", []string{frame("initialized", `,"capabilities":["text"]`), frame("result", `,"output":"HELLO, WÖRLD"`)}},
		{"progress", []string{"progress", "text", "cancel"}, "abc", []string{
			frame("initialized", `,"capabilities":["text","progress","cancel"]`),
			frame("progress", `,"sequence":1,"stage":"started","text":"upper-casing"`),
			frame("progress", `,"sequence":2,"stage":"finalizing","text":"done"`),
			frame("result", `,"output":"ABC"`)}},
		{"growth beyond limit", []string{"text"}, big, []string{frame("initialized", `,"capabilities":["text"]`), frame("failure", `,"category":"execution_failed"`)}},
		{"growth within limit", []string{"text"}, "ɐ", []string{frame("initialized", `,"capabilities":["text"]`), frame("result", `,"output":"Ɐ"`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, bin)
			p.send(initLine(tc.offer...))
			if got := p.next(); got != tc.frames[0] {
				t.Fatalf("initialized = %s", got)
			}
			p.send(execLine(tc.input))
			for _, want := range tc.frames[1:] {
				if got := p.next(); got != want {
					t.Fatalf("frame = %.200s, want %.200s", got, want)
				}
			}
			rest, code := p.finish()
			if rest != "" || code != 0 {
				t.Fatalf("trailing %q exit %d stderr %q", rest, code, p.err.String())
			}
		})
	}
}

func TestBinaryRejectsInvalidInput(t *testing.T) {
	bin := binary(t)
	initialized := frame("initialized", `,"capabilities":["text"]`)
	cases := []struct {
		name, stdin, stdout string
	}{
		{"empty stdin", "", ""},
		{"crlf initialize", strings.TrimSuffix(initLine("text"), "\n") + "\r\n", ""},
		{"workspace only offer", initLine("workspace_edit"), ""},
		{"bad execute", initLine("text") + strings.Replace(execLine("x"), `"input"`, `"Input"`, 1), initialized},
		{"eof before execute", initLine("text"), initialized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, bin)
			p.send(tc.stdin)
			rest, code := p.finish()
			if rest != tc.stdout || code != 1 {
				t.Fatalf("stdout %q exit %d", rest, code)
			}
			if !strings.HasPrefix(p.err.String(), "forge-ref-plugin: error: ") {
				t.Fatalf("stderr %q", p.err.String())
			}
		})
	}
}

func TestBinaryTrailingInputAfterResult(t *testing.T) {
	p := startProc(t, binary(t))
	p.send(initLine("text"))
	p.next()
	p.send(execLine("x"))
	if got := p.next(); got != frame("result", `,"output":"X"`) {
		t.Fatalf("result = %s", got)
	}
	p.send(execLine("y"))
	if rest, code := p.finish(); rest != "" || code != 1 {
		t.Fatalf("stdout %q exit %d", rest, code)
	}
}

func TestBinaryCancel(t *testing.T) {
	// The reference handler finishes at once, so a cancel may only cross the
	// result; the session must still end cleanly with exit 0.
	p := startProc(t, binary(t))
	p.send(initLine("text", "cancel"))
	p.next()
	p.send(execLine("x"))
	if got := p.next(); got != frame("result", `,"output":"X"`) {
		t.Fatalf("result = %s", got)
	}
	p.send(frame("cancel", ""))
	if rest, code := p.finish(); rest != "" || code != 0 {
		t.Fatalf("stdout %q exit %d", rest, code)
	}
}

package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

const id = "0123456789abcdef0123456789abcdef"

const limits = `{"frame_bytes":1048576,"progress_frames":128,"text_bytes":65536,"progress_text_bytes":1024,"commit_subject_bytes":256}`

func initLine(caps ...string) string {
	return `{"version":"v1","id":"` + id + `","type":"initialize","capabilities":["` + strings.Join(caps, `","`) + `"],"limits":` + limits + "}\n"
}

func textLine(input string) string {
	return `{"version":"v1","id":"` + id + `","type":"execute","operation":"text","input":"` + input + "\"}\n"
}

const cancelLine = `{"version":"v1","id":"` + id + `","type":"cancel"}` + "\n"

const wsLine = `{"version":"v1","id":"` + id + `","type":"execute","operation":"workspace_edit","workspace":"/w","instruction":"do it","timeout_ms":60000}` + "\n"

func upper(_ context.Context, req Request) (Result, error) {
	return Result{Output: strings.ToUpper(req.Input)}, nil
}

// session is a running Serve call connected through pipes.
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func start(t *testing.T, caps []plugin.Capability, h ProgressHandler) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ServeWithProgress(context.Background(), inR, outW, caps, h)
		outW.Close()
		done <- err
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return &session{t: t, in: inW, out: bufio.NewReader(outR), done: done}
}

func (s *session) send(lines ...string) {
	s.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.in, l); err != nil {
			s.t.Fatalf("write: %v", err)
		}
	}
}

// next reads the next frame the plugin wrote.
func (s *session) next() string {
	s.t.Helper()
	line, err := s.out.ReadString('\n')
	if err != nil {
		s.t.Fatalf("read frame: %v (partial %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// end closes stdin, requires stdout EOF and returns Serve's error.
func (s *session) end() error {
	s.t.Helper()
	s.in.Close()
	rest, _ := io.ReadAll(s.out)
	if len(rest) != 0 {
		s.t.Fatalf("unexpected trailing output %q", rest)
	}
	return <-s.done
}

// remaining returns everything written until stdout closes, then Serve's error.
func (s *session) remaining() (string, error) {
	rest, _ := io.ReadAll(s.out)
	return string(rest), <-s.done
}

func frame(typ, fields string) string {
	return `{"version":"v1","id":"` + id + `","type":"` + typ + `"` + fields + "}"
}

func TestTextSession(t *testing.T) {
	s := start(t, []plugin.Capability{plugin.CapText}, func(ctx context.Context, req Request, _ Progress) (Result, error) {
		return upper(ctx, req)
	})
	s.send(initLine("text", "progress", "cancel", "workspace_edit", "agent_report"))
	if got, want := s.next(), frame("initialized", `,"capabilities":["text","progress","cancel"]`); got != want {
		t.Fatalf("initialized = %s, want %s", got, want)
	}
	s.send(textLine("héllo"))
	if got, want := s.next(), frame("result", `,"output":"HÉLLO"`); got != want {
		t.Fatalf("result = %s, want %s", got, want)
	}
	if err := s.end(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeWithoutProgressDoesNotSelectIt(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), inR, outW, []plugin.Capability{plugin.CapText, plugin.CapProgress}, upper)
		outW.Close()
	}()
	s := &session{t: t, in: inW, out: bufio.NewReader(outR), done: done}
	s.send(initLine("progress", "text"))
	if got, want := s.next(), frame("initialized", `,"capabilities":["text"]`); got != want {
		t.Fatalf("initialized = %s, want %s", got, want)
	}
	s.send(textLine("x"))
	if got, want := s.next(), frame("result", `,"output":"X"`); got != want {
		t.Fatalf("result = %s, want %s", got, want)
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
}

// runAll feeds a fixed stdin to Serve and returns stdout and the error.
func runAll(t *testing.T, stdin string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Serve(context.Background(), strings.NewReader(stdin), &out, []plugin.Capability{plugin.CapText}, upper)
	return out.String(), err
}

func TestInvalidInitializeWritesNothing(t *testing.T) {
	cases := map[string]string{
		"empty":           "",
		"blank":           "\n",
		"crlf":            strings.TrimSuffix(initLine("text"), "\n") + "\r\n",
		"unterminated":    strings.TrimSuffix(initLine("text"), "\n"),
		"not compact":     strings.Replace(initLine("text"), `"type":`, `"type": `, 1),
		"invalid utf8":    strings.Replace(initLine("text"), `"text"`, "\"te\xffxt\"", 1),
		"execute first":   textLine("x"),
		"wrong version":   strings.Replace(initLine("text"), `"v1"`, `"v2"`, 1),
		"uppercase id":    strings.Replace(initLine("text"), id, strings.ToUpper(id), 1),
		"bad limits":      strings.Replace(initLine("text"), "1048576", "1048577", 1),
		"extra field":     strings.Replace(initLine("text"), `"type"`, `"x":1,"type"`, 1),
		"duplicate field": strings.Replace(initLine("text"), `"type"`, `"id":"`+id+`","type"`, 1),
		"unknown cap":     initLine("text", "magic"),
		"no operation":    initLine("progress"),
		"unsupported op":  initLine("workspace_edit", "progress"),
		"oversized":       `{"version":"v1","x":"` + strings.Repeat("a", plugin.FrameBytes) + "\"}\n",
		"null limits":     strings.Replace(initLine("text"), limits, "null", 1),
	}
	for name, stdin := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runAll(t, stdin+textLine("x"))
			if err == nil || out != "" {
				t.Fatalf("err=%v stdout=%q", err, out)
			}
		})
	}
}

func TestInvalidExecuteWritesOnlyInitialized(t *testing.T) {
	initialized := frame("initialized", `,"capabilities":["text","cancel"]`) + "\n"
	cases := map[string]string{
		"missing":         "",
		"second init":     initLine("text", "cancel"),
		"other id":        strings.Replace(textLine("x"), id, "fedcba9876543210fedcba9876543210", 1),
		"unselected op":   wsLine,
		"contradictory":   strings.Replace(textLine("x"), `"input"`, `"workspace":"/w","input"`, 1),
		"duplicate input": strings.Replace(textLine("x"), `"input"`, `"input":"y","input"`, 1),
		"wrong type":      strings.Replace(textLine("x"), `"x"`, `5`, 1),
		"cancel":          cancelLine,
		"crlf":            strings.TrimSuffix(textLine("x"), "\n") + "\r\n",
		"unterminated":    strings.TrimSuffix(textLine("x"), "\n"),
		"too long input":  textLine(strings.Repeat("a", plugin.TextBytes+1)),
		"lone surrogate":  textLine(`\ud800`),
	}
	for name, exec := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runAll(t, initLine("text", "cancel")+exec)
			if err == nil || out != initialized {
				t.Fatalf("err=%v stdout=%q", err, out)
			}
		})
	}
}

func TestHandlerOutcomes(t *testing.T) {
	cases := []struct {
		name string
		h    Handler
		want string
	}{
		{"invalid request", func(context.Context, Request) (Result, error) { return Result{}, Fail(plugin.CategoryInvalidRequest) }, frame("failure", `,"category":"invalid_request"`)},
		{"incompatible", func(context.Context, Request) (Result, error) { return Result{}, Fail(plugin.CategoryIncompatible) }, frame("failure", `,"category":"incompatible"`)},
		{"wrapped failure", func(context.Context, Request) (Result, error) {
			return Result{}, fmt.Errorf("x: %w", Fail(plugin.CategoryCancelled))
		}, frame("failure", `,"category":"cancelled"`)},
		{"plain error", func(context.Context, Request) (Result, error) { return Result{}, errors.New("boom") }, frame("failure", `,"category":"execution_failed"`)},
		{"bogus category", func(context.Context, Request) (Result, error) { return Result{}, Fail("nope") }, frame("failure", `,"category":"execution_failed"`)},
		{"oversized output", func(context.Context, Request) (Result, error) {
			return Result{Output: strings.Repeat("x", plugin.TextBytes+1)}, nil
		}, frame("failure", `,"category":"execution_failed"`)},
		{"empty output", func(context.Context, Request) (Result, error) { return Result{}, nil }, frame("result", `,"output":""`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, []plugin.Capability{plugin.CapText}, func(ctx context.Context, req Request, _ Progress) (Result, error) { return tc.h(ctx, req) })
			s.send(initLine("text"))
			s.next()
			s.send(textLine("x"))
			if got := s.next(); got != tc.want {
				t.Fatalf("terminal = %s, want %s", got, tc.want)
			}
			if err := s.end(); err != nil {
				t.Fatalf("Serve: %v", err)
			}
		})
	}
}

func TestWorkspaceResultFields(t *testing.T) {
	res := Result{CommitSubject: "feat: edit", Summary: "Did it.", Changes: []string{"a.go: x"}}
	cases := []struct {
		name  string
		offer []string
		res   Result
		want  string
	}{
		{"nothing negotiated", []string{"workspace_edit"}, res, frame("result", "")},
		{"subject only", []string{"workspace_edit", "commit_subject"}, res, frame("result", `,"commit_subject":"feat: edit"`)},
		{"everything", []string{"workspace_edit", "commit_subject", "agent_report"}, res, frame("result", `,"commit_subject":"feat: edit","summary":"Did it.","changes":["a.go: x"]`)},
		{"no report given", []string{"workspace_edit", "agent_report"}, Result{}, frame("result", "")},
		{"bad subject", []string{"workspace_edit", "commit_subject"}, Result{CommitSubject: "two\nlines"}, frame("failure", `,"category":"execution_failed"`)},
		{"partial report", []string{"workspace_edit", "agent_report"}, Result{Changes: []string{"x"}}, frame("failure", `,"category":"execution_failed"`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got Request
			caps := []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapCommitSubject, plugin.CapAgentReport}
			s := start(t, caps, func(_ context.Context, req Request, _ Progress) (Result, error) {
				got = req
				return tc.res, nil
			})
			s.send(initLine(tc.offer...))
			s.next()
			s.send(wsLine)
			if f := s.next(); f != tc.want {
				t.Fatalf("terminal = %s, want %s", f, tc.want)
			}
			if err := s.end(); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if got.Workspace != "/w" || got.Instruction != "do it" || got.Timeout.Milliseconds() != 60000 || got.Operation != plugin.OpWorkspaceEdit || !got.Negotiated(plugin.CapWorkspaceEdit) {
				t.Fatalf("request = %+v", got)
			}
		})
	}
}

func TestProgressSerializedAndClosed(t *testing.T) {
	const workers, each = 8, 10
	var saved Progress
	s := start(t, []plugin.Capability{plugin.CapText}, func(_ context.Context, req Request, progress Progress) (Result, error) {
		saved = progress
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := progress(plugin.StageWorking, "step"); err != nil {
						t.Errorf("progress: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		if err := progress("dreaming", "x"); err == nil {
			t.Error("invalid stage accepted")
		}
		if err := progress(plugin.StageFinalizing, strings.Repeat("x", plugin.ProgressTextBytes+1)); err == nil {
			t.Error("oversized progress text accepted")
		}
		return Result{Output: req.Input}, nil
	})
	s.send(initLine("text", "progress"))
	s.next()
	s.send(textLine("x"))
	for i := 1; i <= workers*each; i++ {
		want := frame("progress", fmt.Sprintf(`,"sequence":%d,"stage":"working","text":"step"`, i))
		if got := s.next(); got != want {
			t.Fatalf("frame %d = %s, want %s", i, got, want)
		}
	}
	if got := s.next(); got != frame("result", `,"output":"x"`) {
		t.Fatalf("terminal = %s", got)
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
	if err := saved(plugin.StageWorking, "late"); !errors.Is(err, ErrProgressClosed) {
		t.Fatalf("late progress = %v", err)
	}
}

func TestProgressLimitAndNegotiation(t *testing.T) {
	for _, negotiated := range []bool{true, false} {
		t.Run(fmt.Sprint(negotiated), func(t *testing.T) {
			var errs []error
			s := start(t, []plugin.Capability{plugin.CapText}, func(_ context.Context, _ Request, progress Progress) (Result, error) {
				for i := 0; i < plugin.ProgressFrames+2; i++ {
					errs = append(errs, progress(plugin.StageStarted, ""))
				}
				return Result{Output: "done"}, nil
			})
			offer := []string{"text"}
			if negotiated {
				offer = append(offer, "progress")
			}
			s.send(initLine(offer...))
			s.next()
			s.send(textLine("x"))
			frames := 0
			for {
				f := s.next()
				if strings.Contains(f, `"type":"result"`) {
					break
				}
				frames++
			}
			if err := s.end(); err != nil {
				t.Fatal(err)
			}
			want := 0
			if negotiated {
				want = plugin.ProgressFrames
			}
			if frames != want {
				t.Fatalf("progress frames = %d, want %d", frames, want)
			}
			for i, err := range errs {
				if wantErr := negotiated && i >= plugin.ProgressFrames; wantErr != errors.Is(err, ErrProgressClosed) || !wantErr && err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
		})
	}
}

func TestCancel(t *testing.T) {
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("handler honours ctx %v", honours), func(t *testing.T) {
			started := make(chan struct{})
			release := make(chan struct{})
			defer close(release)
			s := start(t, []plugin.Capability{plugin.CapText}, func(ctx context.Context, _ Request, _ Progress) (Result, error) {
				close(started)
				if honours {
					<-ctx.Done()
					return Result{Output: "late"}, nil
				}
				<-release
				return Result{}, nil
			})
			s.send(initLine("text", "cancel"))
			s.next()
			s.send(textLine("x"))
			<-started
			s.send(cancelLine)
			if got := s.next(); got != frame("failure", `,"category":"cancelled"`) {
				t.Fatalf("terminal = %s", got)
			}
			if err := s.end(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCancelCrossingTerminal(t *testing.T) {
	s := start(t, []plugin.Capability{plugin.CapText}, func(ctx context.Context, req Request, _ Progress) (Result, error) {
		return upper(ctx, req)
	})
	s.send(initLine("text", "cancel"))
	s.next()
	s.send(textLine("x"))
	if got := s.next(); got != frame("result", `,"output":"X"`) {
		t.Fatalf("terminal = %s", got)
	}
	s.send(cancelLine)
	if err := s.end(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestFatalDuringExecution(t *testing.T) {
	cases := map[string]string{
		"garbage":             "nope\n",
		"second execute":      textLine("y"),
		"cancel unnegotiated": cancelLine,
		"crlf cancel":         strings.TrimSuffix(cancelLine, "\n") + "\r\n",
		"eof":                 "",
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) {
			started := make(chan struct{})
			s := start(t, []plugin.Capability{plugin.CapText}, func(ctx context.Context, _ Request, _ Progress) (Result, error) {
				close(started)
				<-ctx.Done()
				return Result{Output: "late"}, nil
			})
			s.send(initLine("text"))
			s.next()
			s.send(textLine("x"))
			<-started
			s.send(line)
			s.in.Close()
			if rest, err := s.remaining(); rest != "" || err == nil {
				t.Fatalf("stdout=%q err=%v", rest, err)
			}
		})
	}
}

func TestTrailingInputAfterTerminal(t *testing.T) {
	cases := map[string]string{
		"frame":         textLine("y"),
		"second cancel": cancelLine + cancelLine,
		"garbage":       "x",
		"blank":         "\n",
	}
	for name, trailing := range cases {
		t.Run(name, func(t *testing.T) {
			s := start(t, []plugin.Capability{plugin.CapText}, func(ctx context.Context, req Request, _ Progress) (Result, error) {
				return upper(ctx, req)
			})
			s.send(initLine("text", "cancel"))
			s.next()
			s.send(textLine("x"))
			s.next()
			s.send(trailing)
			s.in.Close()
			if rest, err := s.remaining(); rest != "" || err == nil {
				t.Fatalf("stdout=%q err=%v", rest, err)
			}
		})
	}
}

func TestConfigurationErrors(t *testing.T) {
	var out bytes.Buffer
	if err := Serve(context.Background(), strings.NewReader(initLine("text")), &out, []plugin.Capability{"magic"}, upper); err == nil {
		t.Fatal("unknown capability accepted")
	}
	if err := Serve(context.Background(), strings.NewReader(""), &out, []plugin.Capability{plugin.CapText}, nil); err == nil {
		t.Fatal("nil handler accepted")
	}
	if err := ServeWithProgress(context.Background(), strings.NewReader(""), &out, []plugin.Capability{plugin.CapText}, nil); err == nil {
		t.Fatal("nil handler accepted")
	}
	if out.Len() != 0 {
		t.Fatal("output written")
	}
}

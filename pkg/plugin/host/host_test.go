package host_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/cgrouptest"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// fakeCmd runs the scripted plugin scenario (testdata/fakeplugin).
func fakeCmd(tb testing.TB, scenario string) host.Command {
	return host.Command{
		Path:        built.fake,
		Args:        []string{scenario},
		Env:         []string{},
		OutputBytes: 4 << 20,
		// A guard against a hanging test, not a timed assertion: a
		// scenario that wrongly hangs ends as KindTimeout and fails.
		Timeout: time.Minute,
	}
}

func textReq(input string, caps ...plugin.Capability) host.Request {
	if len(caps) == 0 {
		caps = []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel}
	}
	return host.Request{Offer: caps, Operation: plugin.OpText, Input: input}
}

// tracer records frames by direction and type.
type tracer struct {
	mu     sync.Mutex
	frames []string
}

func (t *tracer) hook(d host.Direction, frame []byte) {
	f, err := plugin.DecodeFrame(frame)
	if err != nil {
		panic("trace got an invalid frame")
	}
	t.mu.Lock()
	t.frames = append(t.frames, string(d)+" "+string(f.Type))
	t.mu.Unlock()
}

func (t *tracer) count(entry string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, f := range t.frames {
		if f == entry {
			n++
		}
	}
	return n
}

func wantKind(t *testing.T, err error, want host.Kind) {
	t.Helper()
	if got := host.KindOf(err); got != want {
		t.Fatalf("kind = %v (%v), want %v", got, err, want)
	}
}

func TestReferencePluginSession(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "wrapped"}[wrapped], func(t *testing.T) {
			cmd := host.Command{Path: built.refPlugin, Env: []string{}, OutputBytes: 1 << 20}
			if wrapped {
				cmd.Reaper = built.reapers
			}
			tr := &tracer{}
			cmd.Trace = tr.hook
			var seqs []int64
			out, err := host.Run(context.Background(), cmd, textReq("hello, wörld"), func(p host.Progress) {
				seqs = append(seqs, p.Sequence)
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.Output != "HELLO, WÖRLD" {
				t.Fatalf("output = %q", out.Output)
			}
			if len(seqs) != int(out.Progress) || len(seqs) == 0 || seqs[0] != 1 {
				t.Fatalf("progress callbacks %v, outcome counted %d", seqs, out.Progress)
			}
			for _, e := range []string{"worker->plugin initialize", "plugin->worker initialized", "worker->plugin execute", "plugin->worker result"} {
				if tr.count(e) != 1 {
					t.Errorf("trace has %d × %q, want 1", tr.count(e), e)
				}
			}
		})
	}
}

// The largest text round trip: the result frame (every byte a control
// character escaped to six) is many times the runner's read buffer.
func TestLargestTextSession(t *testing.T) {
	in := strings.Repeat("\x01", plugin.TextBytes)
	cmd := host.Command{Path: built.refPlugin, Env: []string{}, OutputBytes: 1 << 20}
	out, err := host.Run(context.Background(), cmd, textReq(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != in {
		t.Fatalf("output of %d bytes differs from the input", len(out.Output))
	}
}

func TestProgressIsValidatedBeforeCallback(t *testing.T) {
	cases := []struct {
		scenario  string
		callbacks int
		kind      host.Kind
	}{
		{"progress3", 3, 0},
		{"progress-bad-seq", 0, host.KindProtocol},
		{"progress-unnegotiated", 0, host.KindProtocol},
		{"progress-long-text", 0, host.KindProtocol},
		{"progress-129", plugin.ProgressFrames, host.KindProtocol},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			var seqs []int64
			_, err := host.Run(context.Background(), fakeCmd(t, c.scenario), textReq("x"), func(p host.Progress) {
				seqs = append(seqs, p.Sequence)
			})
			wantKind(t, err, c.kind)
			if len(seqs) != c.callbacks {
				t.Fatalf("%d callbacks, want %d", len(seqs), c.callbacks)
			}
			for i, s := range seqs {
				if s != int64(i+1) {
					t.Fatalf("callback %d got sequence %d", i, s)
				}
			}
		})
	}
}

func TestProtocolViolations(t *testing.T) {
	cases := map[string]string{
		"wrong-id":                      "id does not match",
		"unoffered":                     "not offered",
		"crlf":                          "carriage return",
		"oversized":                     "frame exceeds",
		"unterminated-oversize":         "frame exceeds",
		"sends-cancel":                  "only the Worker sends",
		"trailing-frame":                "output after the terminal frame",
		"trailing-bytes":                "final frame lacks its LF",
		"nonzero-exit":                  "nonzero exit",
		"no-exit":                       "within 250ms",
		"early-exit":                    "ended before the terminal frame",
		"exit-before-init":              "ended before initialized",
		"workspace-unnegotiated-report": "agent report was not negotiated",
		"secret":                        "not a JSON object",
	}
	for scenario, reason := range cases {
		t.Run(scenario, func(t *testing.T) {
			req := textReq("x")
			if strings.HasPrefix(scenario, "workspace") {
				req = workspaceReq(t, plugin.CapWorkspaceEdit)
			}
			_, err := host.Run(context.Background(), fakeCmd(t, scenario), req, nil)
			wantKind(t, err, host.KindProtocol)
			if !strings.Contains(err.Error(), reason) {
				t.Fatalf("err = %v, want reason %q", err, reason)
			}
		})
	}
}

func TestSelectionMustIncludeOperation(t *testing.T) {
	req := textReq("x", plugin.CapText, plugin.CapWorkspaceEdit)
	_, err := host.Run(context.Background(), fakeCmd(t, "no-op-cap"), req, nil)
	wantKind(t, err, host.KindProtocol)
}

func TestPluginFailureCarriesCategory(t *testing.T) {
	_, err := host.Run(context.Background(), fakeCmd(t, "failure"), textReq("x"), nil)
	wantKind(t, err, host.KindFailure)
	var he *host.Error
	if !errors.As(err, &he) || he.Category != plugin.CategoryExecutionFailed {
		t.Fatalf("err = %v", err)
	}
}

func workspaceReq(t *testing.T, caps ...plugin.Capability) host.Request {
	return host.Request{Offer: caps, Operation: plugin.OpWorkspaceEdit, Workspace: t.TempDir(), Instruction: "edit", TimeoutMS: 1000}
}

func TestWorkspaceResultFields(t *testing.T) {
	req := workspaceReq(t, plugin.CapWorkspaceEdit, plugin.CapCommitSubject, plugin.CapAgentReport)
	out, err := host.Run(context.Background(), fakeCmd(t, "workspace"), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.CommitSubject == nil || *out.CommitSubject != "feat: edit" || out.Summary == nil || *out.Summary != "did it" || len(out.Changes) != 1 {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestEnvironmentIsExact(t *testing.T) {
	t.Setenv("FORGE_HOST_LEAK", "x")
	cmd := fakeCmd(t, "env")
	cmd.Env = []string{"ONLY=this", "AND=that"}
	cmd.Reaper = built.reapers
	out, err := host.Run(context.Background(), cmd, textReq("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "ONLY=this;AND=that" {
		t.Fatalf("plugin environment = %q", out.Output)
	}
}

func TestErrorsAreValueFree(t *testing.T) {
	cmd := fakeCmd(t, "secret")
	_, err := host.Run(context.Background(), cmd, textReq("SECRET-INPUT"), nil)
	wantKind(t, err, host.KindProtocol)
	missing := host.Command{Path: t.TempDir() + "/SECRET-PATH", Args: []string{"SECRET-ARG"}, Env: []string{}, OutputBytes: 10}
	_, err2 := host.Run(context.Background(), missing, textReq("x"), nil)
	wantKind(t, err2, host.KindSpawn)
	for _, e := range []error{err, err2} {
		for _, bad := range []string{"SECRET", built.fake, os.TempDir()} {
			if strings.Contains(e.Error(), bad) {
				t.Errorf("error %q leaks %q", e, bad)
			}
		}
	}
}

func TestInvalidRequestStartsNothing(t *testing.T) {
	cases := map[string]host.Request{
		"offer lacks op": textReq("x", plugin.CapProgress, plugin.CapWorkspaceEdit),
		"input too big":  textReq(strings.Repeat("a", plugin.TextBytes+1)),
		"bad utf8":       textReq("\xff"),
		"dup offer":      textReq("x", plugin.CapText, plugin.CapText),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			// The path does not exist: a spawn attempt would say KindSpawn.
			cmd := host.Command{Path: "/nonexistent/plugin", Env: []string{}, OutputBytes: 10}
			_, err := host.Run(context.Background(), cmd, req, nil)
			wantKind(t, err, host.KindRequest)
		})
	}
}

func TestTimeout(t *testing.T) {
	cmd := fakeCmd(t, "hang")
	cmd.Timeout = 50 * time.Millisecond
	tr := &tracer{}
	cmd.Trace = tr.hook
	_, err := host.Run(context.Background(), cmd, textReq("x"), nil)
	wantKind(t, err, host.KindTimeout)
	if n := tr.count("worker->plugin cancel"); n != 1 {
		t.Fatalf("%d cancel frames, want 1", n)
	}
}

// cancelOnProgress returns a context and a progress callback that cancels
// it on the first progress frame: the plugin is then past execute and the
// cancellation is already observed when the plugin's next output arrives.
func cancelOnProgress() (context.Context, func(host.Progress)) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, func(host.Progress) { cancel() }
}

func TestCancellationIsAuthoritative(t *testing.T) {
	cases := []struct {
		scenario    string
		wrapped     bool
		cancelFrame int
	}{
		{"cancel-success", false, 1},     // concurrent success
		{"cancel-failure", false, 1},     // plugin's own cancelled failure
		{"cancel-garbage", false, 1},     // exchange error after cancel
		{"cancel-ignored", false, 1},     // plugin ignores cancel: drained, then terminated
		{"cancel-ignored", true, 1},      // same, under the wrapper
		{"no-cancel-cap", false, 0},      // not negotiated: terminated, no frame
		{"no-cancel-cap", true, 0},       // same under the wrapper
		{"limit-after-cancel", false, 1}, // output limit after the context ended
	}
	for _, c := range cases {
		name := c.scenario + map[bool]string{false: "", true: "/wrapped"}[c.wrapped]
		t.Run(name, func(t *testing.T) {
			cmd := fakeCmd(t, c.scenario)
			if c.scenario == "limit-after-cancel" {
				cmd.OutputBytes = 1 << 20
			}
			if c.wrapped {
				cmd.Reaper = built.reapers
			}
			tr := &tracer{}
			cmd.Trace = tr.hook
			ctx, onProgress := cancelOnProgress()
			_, err := host.Run(ctx, cmd, textReq("x"), onProgress)
			wantKind(t, err, host.KindCancelled)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v does not wrap context.Canceled", err)
			}
			if n := tr.count("worker->plugin cancel"); n != c.cancelFrame {
				t.Fatalf("%d cancel frames, want %d", n, c.cancelFrame)
			}
		})
	}
}

func TestCancelBeforeExecuteSendsNoCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := fakeCmd(t, "hang-init")
	tr := &tracer{}
	cmd.Trace = func(d host.Direction, f []byte) {
		tr.hook(d, f)
		cancel() // right after initialize is sent
	}
	_, err := host.Run(ctx, cmd, textReq("x"), nil)
	wantKind(t, err, host.KindCancelled)
	if tr.count("worker->plugin execute")+tr.count("worker->plugin cancel") != 0 {
		t.Fatalf("frames after cancellation: %v", tr.frames)
	}
}

func TestAlreadyCancelledStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := host.Run(ctx, host.Command{Path: "/nonexistent", OutputBytes: 1}, textReq("x"), nil)
	wantKind(t, err, host.KindCancelled)
}

func TestOutputLimitWhileLive(t *testing.T) {
	for _, scenario := range []string{"limit-live", "limit-stdout"} {
		t.Run(scenario, func(t *testing.T) {
			cmd := fakeCmd(t, scenario)
			cmd.OutputBytes = 1 << 20
			if scenario == "limit-stdout" {
				cmd.OutputBytes = 2048
			}
			_, err := host.Run(context.Background(), cmd, textReq("x"), nil)
			wantKind(t, err, host.KindOutputLimit)
		})
	}
}

func TestSpawnFailure(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		cmd := host.Command{Path: t.TempDir() + "/missing", Env: []string{}, OutputBytes: 10}
		if wrapped {
			cmd.Reaper = built.reapers
		}
		_, err := host.Run(context.Background(), cmd, textReq("x"), nil)
		wantKind(t, err, host.KindSpawn)
	}
	// An executable whose interpreter does not exist passes every check
	// before the reaper starts it; the failed exec is still a spawn
	// failure, not a protocol violation.
	script := t.TempDir() + "/plugin"
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := host.Command{Path: script, Env: []string{}, OutputBytes: 10, Reaper: built.reapers}
	_, err := host.Run(context.Background(), cmd, textReq("x"), nil)
	wantKind(t, err, host.KindSpawn)
}

// identity reads a process's start time; "" when gone or a zombie.
func identity(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 20 || string(f[0]) == "Z" {
		return ""
	}
	return string(f[19])
}

func runSetsid(t *testing.T, wrapped bool) (pid int, start string) {
	t.Helper()
	dir := t.TempDir()
	cmd := fakeCmd(t, "setsid")
	cmd.Env = []string{"FAKE_DIR=" + dir}
	if wrapped {
		cmd.Reaper = built.reapers
	}
	out, err := host.Run(context.Background(), cmd, textReq("x"), nil)
	if err != nil || out.Output != "left a grandchild" {
		t.Fatalf("run: %q, %v", out.Output, err)
	}
	b, err := os.ReadFile(dir + "/pid")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("pid file %q", b)
	}
	pid, _ = strconv.Atoi(f[0])
	return pid, f[1]
}

func TestWrapperReapsSetsidGrandchild(t *testing.T) {
	pid, start := runSetsid(t, true)
	if identity(pid) == start {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("setsid grandchild still alive after Run returned")
	}
}

// Without the wrapper the same grandchild survives: the previous test
// would fail if the wrapper did nothing.
func TestWithoutWrapperSetsidGrandchildSurvives(t *testing.T) {
	pid, start := runSetsid(t, false)
	if identity(pid) != start {
		t.Fatal("grandchild gone without the wrapper; the wrapper test proves nothing")
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// containedCmd is scenario run sandboxed (only /proc and /dev/null
// besides the plugin itself) from a pool that contains it in a cgroup of its own.
func containedCmd(t *testing.T, scenario string) host.Command {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	pl := supervise.NewReaperPool(built.wrapper)
	t.Cleanup(pl.Close)
	pl.Contain(cgrouptest.Subtree(t))
	cmd := fakeCmd(t, scenario)
	cmd.Reaper = pl
	cmd.Sandbox = &sandbox.Policy{Rules: []sandbox.Rule{{Path: "/proc", Access: sandbox.ReadOnly}, {Path: "/dev/null", Access: sandbox.Device}}}
	return cmd
}

// A process the plugin leaves holding its stdout cannot speak for it: the
// plugin exits 0 without a terminal frame, and that process, in a session
// of its own, sends a result the moment the plugin has exited and keeps
// stdout (with the reaper's sweep alone, which kills it only after, its
// result was taken within 4 runs). Run takes no result from it, five
// times over.
func TestSurvivorCannotForgeTheResult(t *testing.T) {
	cmd := containedCmd(t, "forger")
	for i := 0; i < 5; i++ {
		out, err := host.Run(context.Background(), cmd, textReq("x"), nil)
		if err == nil {
			t.Fatalf("run %d: the survivor's result %q was taken", i, out.Output)
		}
		wantKind(t, err, host.KindProtocol)
	}
}

package conformance

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// fakeWorkspaceArg turns the test binary into a workspace_edit plugin built
// on the serve SDK (see TestMain); the next argument picks its behaviour.
const fakeWorkspaceArg = "conformance-fake-workspace-plugin"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	if len(os.Args) > 2 && os.Args[1] == fakeWorkspaceArg {
		os.Exit(fakeWorkspacePlugin(os.Args[2]))
	}
	code := m.Run()
	if refPluginDir != "" {
		os.RemoveAll(refPluginDir)
	}
	os.Exit(code)
}

// fakeWorkspacePlugin edits the workspace like a coding agent would:
// "ok" writes CONFORMANCE.md and reports it, "no-change" reports success
// without editing, "commit" edits and then commits (which plugins must
// never do), "touch-on-read" writes into any workspace path it reads on
// stdin before validating the frame.
func fakeWorkspacePlugin(mode string) int {
	if strings.HasPrefix(mode, "raw-") {
		return rawWorkspacePlugin(mode)
	}
	caps := []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapCancel, plugin.CapCommitSubject, plugin.CapAgentReport}
	var stdin io.Reader = os.Stdin
	if mode == "touch-on-read" {
		stdin = &touchingReader{r: os.Stdin}
	}
	err := serve.ServeWithProgress(context.Background(), stdin, os.Stdout, caps,
		func(ctx context.Context, req serve.Request, progress serve.Progress) (serve.Result, error) {
			_ = progress(plugin.StageStarted, "editing")
			if mode != "no-change" {
				if err := os.WriteFile(filepath.Join(req.Workspace, "CONFORMANCE.md"), []byte("plugin conformance check\n"), 0o600); err != nil {
					return serve.Result{}, err
				}
			}
			if mode == "commit" {
				for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=x", "-c", "user.email=x@localhost", "commit", "-qm", "x"}} {
					cmd := exec.CommandContext(ctx, "git", append([]string{"-C", req.Workspace}, args...)...)
					cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + req.Workspace}
					if err := cmd.Run(); err != nil {
						return serve.Result{}, err
					}
				}
			}
			_ = progress(plugin.StageFinalizing, "done")
			return serve.Result{
				CommitSubject: "docs: add conformance note",
				Summary:       "Added CONFORMANCE.md.",
				Changes:       []string{"CONFORMANCE.md: new file"},
			}, nil
		})
	if err != nil {
		return 1
	}
	return 0
}

// pluginEnv is the plugins' environment in these tests: the system
// directories first, so python3 is the system interpreter rather than a
// version-manager shim that takes a shell and ~100 ms to start (the suite
// starts well over a hundred processes per run).
// rawWorkspacePlugin speaks the protocol by hand to send results serve
// would never produce: "raw-subject" selects only workspace_edit yet sends
// commit_subject; "raw-partial-report" selects agent_report and sends a
// summary without changes.
func rawWorkspacePlugin(mode string) int {
	in := bufio.NewReader(os.Stdin)
	line, err := plugin.ReadFrame(in)
	if err != nil {
		return 1
	}
	init, err := plugin.DecodeFrame(line)
	if err != nil {
		return 1
	}
	selection := `["workspace_edit"]`
	result := `"commit_subject":"docs: add conformance note"`
	if mode == "raw-partial-report" {
		selection = `["workspace_edit","agent_report"]`
		result = `"summary":"Added CONFORMANCE.md."`
	}
	fmt.Printf(`{"version":"v1","id":"%s","type":"initialized","capabilities":%s}`+"\n", init.ID, selection)
	if line, err = plugin.ReadFrame(in); err != nil {
		return 1
	}
	exec, err := plugin.DecodeFrame(line)
	if err != nil {
		return 1
	}
	if err := os.WriteFile(filepath.Join(exec.Workspace, "CONFORMANCE.md"), []byte("check\n"), 0o600); err != nil {
		return 1
	}
	fmt.Printf(`{"version":"v1","id":"%s","type":"result",%s}`+"\n", init.ID, result)
	if _, err := io.Copy(io.Discard, in); err != nil {
		return 1
	}
	return 0
}

// touchingReader writes a file into the first workspace path that passes
// through it, valid frame or not.
type touchingReader struct {
	r       io.Reader
	seen    []byte
	touched bool
}

var workspaceField = regexp.MustCompile(`"workspace":"(/[^"]+)"`)

func (t *touchingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if !t.touched && len(t.seen) < 1<<20 {
		t.seen = append(t.seen, p[:n]...)
		if m := workspaceField.FindSubmatch(t.seen); m != nil {
			t.touched = true
			_ = os.WriteFile(filepath.Join(string(m[1]), "EARLY.md"), []byte("too early\n"), 0o600)
		}
	}
	return n, err
}

func pluginEnv() []string { return []string{"PATH=/usr/bin:/bin:" + os.Getenv("PATH")} }

// refPluginDir is the directory buildRefPlugin made, if it ran; TestMain
// removes it after the tests.
var refPluginDir string

// buildRefPlugin builds cmd/forge-ref-plugin once per test binary run.
var buildRefPlugin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "conformance-ref-")
	refPluginDir = dir
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "forge-ref-plugin")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/forge-ref-plugin")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func refPlugin(t *testing.T) string {
	t.Helper()
	bin, err := buildRefPlugin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {}) // the binary's directory is shared by every test
	return bin
}

// runSuite runs the suite and returns the verdicts by name.
func runSuite(t *testing.T, cfg Config) (Summary, map[string]Result) {
	t.Helper()
	if cfg.Env == nil {
		cfg.Env = pluginEnv()
	}
	if cfg.TempDir == "" {
		cfg.TempDir = t.TempDir()
	}
	got := map[string]Result{}
	sum, err := Run(context.Background(), cfg, func(r Result) { got[r.Name] = r })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum, got
}

func requireAllPass(t *testing.T, op plugin.Operation, sum Summary, got map[string]Result) {
	t.Helper()
	for _, r := range got {
		if !r.Passed() {
			t.Errorf("%s", r.Line())
		}
	}
	if want := len(Scenarios(op)); sum.Total != want || sum.Passed != want || sum.Failed != 0 {
		t.Errorf("summary %+v, want %d of %d passed", sum, want, want)
	}
}

// selfReaper is the test binary, which dispatches the reaper mode in
// TestMain, so host-runner sessions run under the Linux wrapper.
func selfReaper(t *testing.T) *supervise.ReaperPool {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pl := supervise.NewReaperPool(self)
	t.Cleanup(pl.Close)
	return pl
}

func TestReferencePluginPassesEveryScenario(t *testing.T) {
	sum, got := runSuite(t, Config{Command: []string{refPlugin(t)}, Operation: plugin.OpText, Reaper: selfReaper(t)})
	requireAllPass(t, plugin.OpText, sum, got)
}

func TestPythonExamplePassesEveryScenario(t *testing.T) {
	script, err := filepath.Abs("../../../examples/forge-plugin-v1.py")
	if err != nil {
		t.Fatal(err)
	}
	sum, got := runSuite(t, Config{Command: []string{script}, Operation: plugin.OpText})
	requireAllPass(t, plugin.OpText, sum, got)
}

func TestWorkspacePluginPassesEveryScenario(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sum, got := runSuite(t, Config{Command: []string{self, fakeWorkspaceArg, "ok"}, Operation: plugin.OpWorkspaceEdit, Reaper: selfReaper(t)})
	requireAllPass(t, plugin.OpWorkspaceEdit, sum, got)
}

// failCase runs a deliberately broken plugin on a few scenarios and
// requires exactly the listed ones to fail, each with its reason.
type failCase struct {
	name    string
	command func(t *testing.T) []string
	op      plugin.Operation
	timeout time.Duration
	run     []string          // scenarios to run
	fail    map[string]string // scenario -> reason substring
}

func broken(mode string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		script, err := filepath.Abs("../../../testdata/conformance/broken-plugin.py")
		if err != nil {
			t.Fatal(err)
		}
		return []string{script, mode, refPlugin(t)}
	}
}

func brokenWorkspace(mode string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return []string{self, fakeWorkspaceArg, mode}
	}
}

func TestBrokenPluginsFail(t *testing.T) {
	cases := []failCase{
		{name: "exits 0 on invalid input", command: broken("exit-zero"),
			run: []string{"session-valid", "framing-blank-line-before-initialize", "id-mismatch-execute", "version-v2"},
			fail: map[string]string{
				"framing-blank-line-before-initialize": "exited 0 after invalid input",
				"id-mismatch-execute":                  "exited 0 after invalid input",
				"version-v2":                           "exited 0 after invalid input",
			}},
		{name: "writes stdout on invalid initialization", command: broken("stdout-on-bad-init"),
			run: []string{"session-valid", "version-v2", "framing-crlf-initialize", "id-mismatch-execute"},
			fail: map[string]string{
				"version-v2":              "wrote to stdout after an invalid initialization",
				"framing-crlf-initialize": "wrote to stdout after an invalid initialization",
			}},
		{name: "non-compact output", command: broken("noncompact"),
			run: []string{"session-valid", "id-mismatch-execute", "version-v2"},
			fail: map[string]string{
				"session-valid":       "not compact",
				"id-mismatch-execute": "not compact",
			}},
		{name: "extra trailing frame", command: broken("trailing-frame"),
			run: []string{"session-valid", "session-host-runner", "version-v2"},
			fail: map[string]string{
				"session-valid":       "after the terminal frame",
				"session-host-runner": "host runner: plugin protocol violation",
			}},
		{name: "slow exit", command: broken("slow-exit"),
			run: []string{"session-valid", "session-host-runner", "version-v2"},
			fail: map[string]string{
				"session-valid":       "within 250 ms",
				"session-host-runner": "host runner: plugin protocol violation",
			}},
		{name: "wrong id", command: broken("wrong-id"),
			run:  []string{"session-valid", "version-v2"},
			fail: map[string]string{"session-valid": "id does not match"}},
		{name: "unnumbered or unnegotiated progress", command: broken("extra-progress"),
			run: []string{"session-valid", "session-minimal-offer"},
			fail: map[string]string{
				"session-valid":         "not consecutive",
				"session-minimal-offer": "progress was not negotiated",
			}},
		{name: "too many progress frames", command: broken("progress-flood"),
			run:  []string{"session-valid"},
			fail: map[string]string{"session-valid": "progress sequence out of range"}},
		{name: "progress text over its limit", command: broken("progress-long-text"),
			run:  []string{"session-valid"},
			fail: map[string]string{"session-valid": "progress text exceeds 1024 bytes"}},
		{name: "workspace field in a text result", command: broken("result-extra-field"),
			run:  []string{"session-valid"},
			fail: map[string]string{"session-valid": "result frame has missing or foreign fields"}},
		{name: "failure for a valid request", command: broken("failure-on-valid"),
			run:  []string{"session-valid", "session-cancel"},
			fail: map[string]string{"session-valid": "answered a valid request with a failure frame (category execution_failed)"}},
		{name: "selects a capability that was not offered", command: broken("select-unoffered"),
			run:  []string{"session-valid", "id-mismatch-execute"},
			fail: map[string]string{"session-valid": "not offered", "id-mismatch-execute": "not offered"}},
		{name: "skips blank lines", command: broken("lenient-blank"),
			run: []string{"session-valid", "framing-blank-line-before-initialize", "framing-blank-line-before-execute"},
			fail: map[string]string{
				"framing-blank-line-before-initialize": "wrote to stdout after an invalid initialization",
				"framing-blank-line-before-execute":    "wrote to stdout after the initialized frame",
			}},
		{name: "ignores frames after execute", command: broken("ignore-after-execute"),
			run:  []string{"session-valid", "session-cancel", "order-second-execute"},
			fail: map[string]string{"order-second-execute": "exited 0 after invalid input"}},
		{name: "hangs on invalid input", command: broken("hang-on-invalid"), timeout: time.Second,
			run:  []string{"version-v2"},
			fail: map[string]string{"version-v2": "timeout"}},
		{name: "crashes on invalid input", command: broken("crash-on-invalid"),
			run:  []string{"version-v2"},
			fail: map[string]string{"version-v2": "killed by signal 9"}},
		{name: "never answers", command: func(*testing.T) []string { return []string{"false"} },
			run: []string{"session-valid", "version-v2"},
			fail: map[string]string{
				"session-valid": "stdout ended before the initialized frame (exit 1)",
			}},
		{name: "workspace unchanged", command: brokenWorkspace("no-change"), op: plugin.OpWorkspaceEdit,
			run:  []string{"session-valid", "payload-workspace-relative"},
			fail: map[string]string{"session-valid": "no change"}},
		{name: "plugin commits", command: brokenWorkspace("commit"), op: plugin.OpWorkspaceEdit,
			run:  []string{"session-valid", "session-minimal-offer", "payload-timeout-zero"},
			fail: map[string]string{"session-valid": "moved HEAD", "session-minimal-offer": "moved HEAD"}},
		{name: "unnegotiated commit_subject", command: brokenWorkspace("raw-subject"), op: plugin.OpWorkspaceEdit,
			run:  []string{"session-valid"},
			fail: map[string]string{"session-valid": "commit_subject was not negotiated"}},
		{name: "partial agent report", command: brokenWorkspace("raw-partial-report"), op: plugin.OpWorkspaceEdit,
			run:  []string{"session-valid"},
			fail: map[string]string{"session-valid": "agent report needs both summary and changes"}},
		{name: "plugin edits on an invalid request", command: brokenWorkspace("touch-on-read"), op: plugin.OpWorkspaceEdit,
			run: []string{"payload-timeout-zero", "field-unknown-execute", "version-v2"},
			fail: map[string]string{
				"payload-timeout-zero":  "an invalid request changed the workspace",
				"field-unknown-execute": "an invalid request changed the workspace",
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := c.op
			if op == "" {
				op = plugin.OpText
			}
			re := regexp.MustCompile("^(" + strings.Join(c.run, "|") + ")$")
			sum, got := runSuite(t, Config{Command: c.command(t), Operation: op, Timeout: c.timeout, Match: re.MatchString})
			if sum.Total != len(c.run) {
				t.Fatalf("ran %d scenarios, want %d", sum.Total, len(c.run))
			}
			for _, name := range c.run {
				r := got[name]
				reason, wantFail := c.fail[name]
				switch {
				case wantFail && r.Passed():
					t.Errorf("%s passed, want FAIL with %q", name, reason)
				case wantFail && !strings.Contains(r.Err.Error(), reason):
					t.Errorf("%s: got %q, want reason containing %q", name, r.Line(), reason)
				case !wantFail && !r.Passed():
					t.Errorf("%s failed, want PASS: %s", name, r.Line())
				}
			}
		})
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	cases := map[string]Config{
		"no command":       {Operation: plugin.OpText},
		"bad operation":    {Command: []string{"true"}, Operation: "shout", Env: pluginEnv()},
		"plugin not found": {Command: []string{"no-such-plugin-anywhere"}, Operation: plugin.OpText, Env: pluginEnv()},
		"not executable":   {Command: []string{"../../../testdata/conformance/README.md"}, Operation: plugin.OpText, Env: pluginEnv()},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			called := false
			if _, err := Run(context.Background(), cfg, func(Result) { called = true }); err == nil {
				t.Fatal("Run accepted a bad config")
			}
			if called {
				t.Fatal("a scenario ran despite the bad config")
			}
		})
	}
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum, err := Run(ctx, Config{Command: []string{refPlugin(t)}, Operation: plugin.OpText, Env: pluginEnv(), TempDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != 0 {
		t.Fatalf("ran %d scenarios after the context ended", sum.Total)
	}
}

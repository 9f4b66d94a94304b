// Package agenttest is the fixture setup the agent adapters' tests share
// (pkg/claude, pkg/codex, pkg/agentplugin and the forge-claude-plugin and
// forge-codex-plugin commands): the test binary doubling as the supervise
// reaper, a reaper pool of it, the paths of the fake CLIs under the
// top-level testdata, the model gateway's variables, a one-commit Git
// workspace, a recorder of an
// adapter's progress stages, and the checks that a run's error has the
// expected reason and category and that a fake's processes are gone. It is imported by tests only, from packages
// two directories below the module root (pkg/NAME, cmd/NAME).
package agenttest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// ServeReaper, called first in TestMain, runs the test binary as the
// reaper and exits when it was started as one (supervise.ReaperArg).
func ServeReaper() {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
}

// Self is the running test binary's path.
func Self(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Reapers is a pool of the test binary's reapers (see ServeReaper), closed
// after the test.
func Reapers(t testing.TB) *supervise.ReaperPool {
	t.Helper()
	pl := supervise.NewReaperPool(Self(t))
	t.Cleanup(pl.Close)
	return pl
}

// Program is the absolute path of the test program testdata/NAME.
func Program(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs("../../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FakeClaude is the deterministic fake Claude Code (testdata/fake-claude).
func FakeClaude(t testing.TB) string { t.Helper(); return Program(t, "fake-claude/claude") }

// FakeCodex is the deterministic fake Codex CLI (testdata/fake-codex).
func FakeCodex(t testing.TB) string { t.Helper(); return Program(t, "fake-codex/codex") }

// Credential is the gateway credential GatewayEnv hands out.
const Credential = "fgw-5e1f0c0ffee0ddba11c0ffee0ddba11c0ffee0ddba11c0ffee0ddba11c0ffee0"

// GatewayURL is the gateway GatewayEnv names (nothing listens there).
const GatewayURL = "http://127.0.0.1:9"

// GatewayEnv is the model gateway as the Worker hands it to a plugin
// (pkg/plugin's FORGE_GATEWAY_*): GatewayURL, Credential and offer, the
// providers' "ID=KIND" list.
func GatewayEnv(offer string) []string {
	return []string{plugin.EnvGatewayURL + "=" + GatewayURL, plugin.EnvGatewayToken + "=" + Credential,
		plugin.EnvGatewayProviders + "=" + offer}
}

// GitWorkspace creates a Git repository with one empty commit on main in a
// temporary directory, without global or system Git configuration, and
// returns its path.
func GitWorkspace(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "--template=", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "--allow-empty", "-m", "base"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], err, out)
		}
	}
	return dir
}

// Stages records the progress an adapter reports. Its Progress method is
// the adapter's progress callback: it requires each stage's text to be the
// adapter's fixed lifecycle text and closes Working at the first working
// stage.
type Stages struct {
	t       testing.TB
	texts   map[plugin.Stage]string
	mu      sync.Mutex
	stages  []plugin.Stage
	working chan struct{}
	once    sync.Once
}

// NewStages returns a recorder expecting texts as the text of each stage.
func NewStages(t testing.TB, texts map[plugin.Stage]string) *Stages {
	return &Stages{t: t, texts: texts, working: make(chan struct{})}
}

// Progress records stage.
func (s *Stages) Progress(stage plugin.Stage, text string) error {
	s.mu.Lock()
	s.stages = append(s.stages, stage)
	s.mu.Unlock()
	if text != s.texts[stage] {
		s.t.Errorf("progress %s text %q is not the fixed lifecycle text", stage, text)
	}
	if stage == plugin.StageWorking {
		s.once.Do(func() { close(s.working) })
	}
	return nil
}

// Got is the stages recorded so far.
func (s *Stages) Got() []plugin.Stage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]plugin.Stage(nil), s.stages...)
}

// Working is closed once the working stage was reported.
func (s *Stages) Working() <-chan struct{} { return s.working }

// RequireEmpty fails the test unless dir exists and is empty (an adapter's
// private run directories are gone).
func RequireEmpty(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("private run directory left behind (%d entries, %v)", len(entries), err)
	}
}

// RequireReason fails the test unless err carries the adapter reason want
// and the category cat, and its text holds no "/" (no path) and none of
// forbidden.
func RequireReason(t testing.TB, err error, want agent.Reason, cat plugin.Category, forbidden ...string) {
	t.Helper()
	if got := agent.ReasonOf(err); got != want {
		t.Fatalf("reason %q (%v), want %q", got, err, want)
	}
	if got := agent.CategoryOf(err); got != cat {
		t.Fatalf("category %s, want %s", got, cat)
	}
	for _, s := range append([]string{"/"}, forbidden...) {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error text carries %q: %q", s, err)
		}
	}
}

// RequireGone reads the pid file a fake CLI writes (its own pid, its
// process group and its child's pid) and fails the test unless all three
// are gone.
func RequireGone(t testing.TB, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal("the fake did not record its pids")
	}
	fields := strings.Fields(string(b))
	if len(fields) != 3 {
		t.Fatalf("pid file %q", b)
	}
	for i, s := range fields {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 1 {
			t.Fatalf("pid file %q", b)
		}
		if i == 1 {
			n = -n // the process group
		}
		if err := syscall.Kill(n, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("process (group) %d still exists: %v", n, err)
		}
	}
}

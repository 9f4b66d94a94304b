package agenttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

func TestGitWorkspaceHasOneCommitOnMain(t *testing.T) {
	dir := GitWorkspace(t)
	out, err := exec.Command("git", "-C", dir, "rev-list", "--count", "main").Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("rev-list --count main: %q, %v", out, err)
	}
	RequireEmpty(t, t.TempDir())
}

func TestStagesRecordsAndSignalsWorking(t *testing.T) {
	texts := map[plugin.Stage]string{plugin.StageStarted: "s", plugin.StageWorking: "w"}
	s := NewStages(t, texts)
	s.Progress(plugin.StageStarted, "s")
	select {
	case <-s.Working():
		t.Fatal("Working closed before the working stage")
	default:
	}
	s.Progress(plugin.StageWorking, "w")
	s.Progress(plugin.StageWorking, "w")
	<-s.Working()
	if got, want := s.Got(), []plugin.Stage{plugin.StageStarted, plugin.StageWorking, plugin.StageWorking}; !slices.Equal(got, want) {
		t.Fatalf("Got %v, want %v", got, want)
	}
}

// failures stands in for the test in the Require checks: it records a
// fatal failure and ends the goroutine, as testing.T does.
type failures struct {
	testing.TB
	failed bool
}

func (f *failures) Fatal(args ...any)                 { f.failed = true; runtime.Goexit() }
func (f *failures) Fatalf(format string, args ...any) { f.failed = true; runtime.Goexit() }

// fails reports whether check failed the test it was given.
func fails(t *testing.T, check func(tb testing.TB)) bool {
	f := &failures{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); check(f) }()
	<-done
	return f.failed
}

func TestRequireReason(t *testing.T) {
	err := agent.NewError("codex", agent.ReasonUnavailable)
	if fails(t, func(tb testing.TB) {
		RequireReason(tb, err, agent.ReasonUnavailable, plugin.CategoryIncompatible, "secret")
	}) {
		t.Error("the expected reason and category failed")
	}
	for name, check := range map[string]func(tb testing.TB){
		"reason":   func(tb testing.TB) { RequireReason(tb, err, agent.ReasonWorkspace, plugin.CategoryIncompatible) },
		"category": func(tb testing.TB) { RequireReason(tb, err, agent.ReasonUnavailable, plugin.CategoryExecutionFailed) },
		"forbidden": func(tb testing.TB) {
			RequireReason(tb, err, agent.ReasonUnavailable, plugin.CategoryIncompatible, "codex")
		},
		"path": func(tb testing.TB) {
			RequireReason(tb, fmt.Errorf("/tmp/x: %w", err), agent.ReasonUnavailable, plugin.CategoryIncompatible)
		},
	} {
		if !fails(t, check) {
			t.Errorf("a wrong %s passed", name)
		}
	}
}

// A process that ran in its own group with a child and exited is gone; a
// running one is not.
func TestRequireGone(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	cmd := exec.Command("sh", "-c", `true & echo $$ $$ $! >"$1"; wait`, "sh", pids)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if fails(t, func(tb testing.TB) { RequireGone(tb, pids) }) {
		t.Error("an exited process tree is reported alive")
	}
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	p := strconv.Itoa(live.Process.Pid)
	os.WriteFile(pids, []byte(p+" "+p+" "+p+"\n"), 0o600)
	if !fails(t, func(tb testing.TB) { RequireGone(tb, pids) }) {
		t.Error("a running process is reported gone")
	}
}

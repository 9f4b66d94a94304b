package agenttest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

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

package install

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAgentPluginList: agent-plugins.txt, the one list the release
// builder, the Formula renderer, the installer and forge doctor read, is
// one plugin a line, byte-wise sorted, each a command of this repository;
// every one is in the Worker archive and installed.
func TestAgentPluginList(t *testing.T) {
	ps := AgentPlugins()
	if strings.Join(ps, "\n")+"\n" != agentPluginList {
		t.Fatalf("agent-plugins.txt is not one name a line: %q", agentPluginList)
	}
	if len(ps) < 2 || !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
		t.Fatalf("agent plugins %v", ps)
	}
	name := regexp.MustCompile(`^forge-[a-z][a-z0-9]*-plugin$`)
	for _, p := range ps {
		if !name.MatchString(p) || p == "forge-ref-plugin" {
			t.Errorf("%s is not an agent plugin name", p)
		}
		if _, err := os.Stat("../../cmd/" + p + "/main.go"); err != nil {
			t.Errorf("%s has no command: %v", p, err)
		}
		if !slices.Contains(archiveMembers["worker"], p) || !slices.ContainsFunc(binaries, func(b executable) bool { return b.name == p && b.kind == "worker" }) {
			t.Errorf("%s is not shipped and installed", p)
		}
	}
	want := []string{"VERSION", "forge-claude-plugin", "forge-codex-plugin", "forge-gemini-plugin", "forge-ref-plugin", "forge-worker"}
	if !slices.Equal(archiveMembers["worker"], want) {
		t.Fatalf("worker archive %v", archiveMembers["worker"])
	}
}

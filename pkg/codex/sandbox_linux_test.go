package codex

import (
	"slices"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// TestLinuxCommandsStayOffTheNetwork: on Linux Codex gets no --sandbox
// (which would make it ignore the permission profile, and whose
// danger-full-access left the commands on the network) and a profile that
// turns the commands' network off. scripts/codex-e2e.sh proves the real
// CLI refuses a command's connection with it.
func TestLinuxCommandsStayOffTheNetwork(t *testing.T) {
	args := Args("/w", agent.Want{Subject: true}, "/d/s", "/d/l")
	for _, a := range args {
		if a == "--sandbox" || a == "-s" || strings.HasPrefix(a, "--sandbox=") || strings.Contains(a, "danger-full-access") {
			t.Fatalf("argv has %q: %q", a, args)
		}
	}
	for _, want := range []string{
		`default_permissions="forge"`,
		`permissions.forge.filesystem={":root"="write"}`,
		"permissions.forge.network.enabled=false",
	} {
		i := slices.Index(args, want)
		if i < 1 || args[i-1] != "-c" {
			t.Errorf("argv lacks -c %s: %q", want, args)
		}
	}
}

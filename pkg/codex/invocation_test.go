package codex

import (
	"slices"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

func TestArgsAreExactlyTheSupportedFlags(t *testing.T) {
	const ws = "/srv/forge/worktrees/a1"
	base := append([]string{"exec", "--cd", ws}, SandboxArgs()...)
	base = append(base, "--ephemeral", "--strict-config", "--ignore-rules", "-c", `approval_policy="never"`, "--json")
	tests := []struct {
		name string
		want agent.Want
		tail []string
	}{
		{"nothing negotiated", agent.Want{}, []string{"-"}},
		{"subject", agent.Want{Subject: true}, []string{"--output-schema", "/d/s.json", "--output-last-message", "/d/l.json", "-"}},
		{"report", agent.Want{Report: true}, []string{"--output-schema", "/d/s.json", "--output-last-message", "/d/l.json", "-"}},
		{"both", agent.Want{Subject: true, Report: true}, []string{"--output-schema", "/d/s.json", "--output-last-message", "/d/l.json", "-"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Args(ws, tc.want, "/d/s.json", "/d/l.json")
			if want := append(slices.Clone(base), tc.tail...); !slices.Equal(got, want) {
				t.Fatalf("argv\n got %q\nwant %q", got, want)
			}
			if slices.Contains(got, "--skip-git-repo-check") {
				t.Fatal("the workspace is a Git worktree; --skip-git-repo-check must not be passed")
			}
		})
	}
}

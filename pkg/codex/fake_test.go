package codex

import (
	"errors"
	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
	"os/exec"
	"strings"
	"testing"
)

// realExecFlags are the `codex exec` options of codex-cli 0.169.0 that the
// adapter may use, as listed by its --help (checked by hand against the
// installed npm package @openai/codex@0.169.0).
var realExecFlags = map[string]bool{
	"--cd": true, "-C": true, "--sandbox": true, "-s": true, "--output-schema": true,
	"--output-last-message": true, "-o": true, "--json": true, "--ephemeral": true,
	"--skip-git-repo-check": true, "--strict-config": true, "--ignore-rules": true, "-c": true, "--config": true,
}

func TestArgsUseOnlyRealFlags(t *testing.T) {
	args := Args("/w", agent.Want{Subject: true, Report: true}, "/d/s", "/d/l")
	if args[0] != "exec" || args[len(args)-1] != "-" {
		t.Fatalf("argv must be `exec ... -`: %q", args)
	}
	for _, a := range args[1 : len(args)-1] {
		if strings.HasPrefix(a, "-") && !realExecFlags[a] {
			t.Errorf("flag %s is not a codex-cli 0.169.0 exec option", a)
		}
	}
}

// TestFakeSpeaksTheCLISurface pins the fake's command line to the real
// one's behaviour: clap-style value forms, exit 2 for bad usage, exit 1
// outside a Git repository.
func TestFakeSpeaksTheCLISurface(t *testing.T) {
	ws := agenttest.GitWorkspace(t)
	plain := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"plugin argv", Args(ws, agent.Want{}, "", ""), 0},
		{"inline values", []string{"exec", "--cd=" + ws, "-s=workspace-write", "-cfoo=1", "--json", "-"}, 0},
		{"alias", []string{"e", "-C", ws, "-"}, 0},
		{"unknown flag", []string{"exec", "-C", ws, "--bogus", "-"}, 2},
		{"real but unsupported flag", []string{"exec", "-C", ws, "--model", "o3", "-"}, 2},
		{"repeated single flag", []string{"exec", "-C", ws, "--json", "--json", "-"}, 2},
		{"bad sandbox", []string{"exec", "-C", ws, "--sandbox", "none", "-"}, 2},
		{"missing value", []string{"exec", "--cd"}, 2},
		{"override without =", []string{"exec", "-C", ws, "-c", "foo", "-"}, 2},
		{"value on a switch", []string{"exec", "-C", ws, "--json=yes", "-"}, 2},
		{"two prompts", []string{"exec", "-C", ws, "-", "more"}, 2},
		{"other subcommand", []string{"review"}, 2},
		{"outside Git", []string{"exec", "-C", plain, "-"}, 1},
		{"outside Git, check skipped", []string{"exec", "-C", plain, "--skip-git-repo-check", "-"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(agenttest.FakeCodex(t), tc.args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			cmd.Stdin = strings.NewReader("Append the line one to the file named log.txt.\n")
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d", code, tc.code)
			}
		})
	}
}

package acceptance

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestWorkspaceViolationsAreUndone (F7): Git state a violating plugin
// changes in the shared repository (a new branch, config, a moved main)
// is gone after the attempt, and later jobs still run on the real base.
func TestWorkspaceViolationsAreUndone(t *testing.T) {
	t.Parallel()
	root, repo, base := gitRepo(t)
	plugin, err := filepath.Abs(filepath.Join("..", "..", "testdata", "acceptance", "edit-plugin.py"))
	must(t, err)
	g := newGate(t, gateOpts{codingRepo: true, maxAttempts: 1})
	g.startWorker(t, workerOpts{plugins: map[string]string{"edit": plugin}, repoRoot: root, repoPath: repo})
	config := gitOut(t, repo, "config", "--list", "--local")
	for _, ins := range []string{"new-ref", "git-config", "fsmonitor /nonexistent/monitor", "move-main"} {
		b, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": base, "instruction": ins})
		id := g.submit(t, string(b))
		if j := g.waitTerminal(t, id); j.Status != "failed" || j.FailureCode != "workspace_violation" {
			t.Fatalf("%s: job %+v", ins, j)
		}
		if h := gitOut(t, repo, "rev-parse", "refs/heads/main"); h != base {
			t.Fatalf("%s: main moved to %s", ins, h)
		}
		if b := gitOut(t, repo, "for-each-ref", "--format=%(refname)", "refs/heads/"); b != "refs/heads/main" {
			t.Fatalf("%s: branches %q", ins, b)
		}
		if c := gitOut(t, repo, "config", "--list", "--local"); c != config {
			t.Fatalf("%s: config changed:\n%s", ins, c)
		}
	}
	b, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": base, "instruction": "write after"})
	if j := g.waitTerminal(t, g.submit(t, string(b))); j.Status != "succeeded" {
		t.Fatalf("job after the violations: %+v", j)
	}
}

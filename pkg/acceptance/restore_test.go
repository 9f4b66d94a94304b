package acceptance

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestWorkspaceViolationsAreUndone (F7): Git state a violating plugin
// changes in the shared repository (a commit, a new branch, config, a
// moved main) is gone after the attempt, and later jobs still run on the
// real base.
//
// Two layers hold this. Sandboxed (the default), the writes never happen:
// git is refused, the plugin exits non-zero without a result, and the
// attempt is a protocol failure (plugin_protocol_violation, retryable;
// with max_attempts 1 the job ends max_attempts_exceeded). Defence in
// depth: behind a Worker with "sandbox": "none", which lets the writes
// through, the Worker's own checks still end each job workspace_violation
// and undo what the plugin changed.
func TestWorkspaceViolationsAreUndone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ sandbox, jobCode, attemptCode string }{
		{"", "max_attempts_exceeded", "plugin_protocol_violation"},
		{"none", "workspace_violation", "workspace_violation"},
	} {
		name := map[string]string{"": "sandboxed", "none": "unsandboxed"}[c.sandbox]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			violationsUndone(t, c.sandbox, c.jobCode, c.attemptCode)
		})
	}
}

func violationsUndone(t *testing.T, sandbox, jobCode, attemptCode string) {
	root, repo, base := gitRepo(t)
	plugin, err := filepath.Abs(filepath.Join("..", "..", "testdata", "acceptance", "edit-plugin.py"))
	must(t, err)
	g := newGate(t, gateOpts{codingRepo: true, maxAttempts: 1})
	w := g.startWorker(t, workerOpts{plugins: map[string]string{"edit": plugin}, repoRoot: root, repoPath: repo, sandbox: sandbox})
	if sandbox == "none" {
		w.logs.waitFor(t, "sandbox none", func(e map[string]any) bool { return e["sandbox"] == "none" })
	}
	config := gitOut(t, repo, "config", "--list", "--local")
	for _, ins := range []string{"commit", "new-ref", "git-config", "fsmonitor /nonexistent/monitor", "move-main"} {
		b, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": base, "instruction": ins})
		id := g.submit(t, string(b))
		j := g.waitTerminal(t, id)
		a := g.aggregate(t, id)
		if j.Status != "failed" || j.FailureCode != jobCode || len(a.Attempts) != 1 || a.Attempts[0].FailureCode != attemptCode {
			t.Fatalf("%s: job %+v attempts %+v, want %s (attempt %s)", ins, j, a.Attempts, jobCode, attemptCode)
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

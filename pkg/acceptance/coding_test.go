package acceptance

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo makes repos/demo with one commit on main and returns the root,
// the repository path and the base commit.
func gitRepo(t testing.TB) (root, path, base string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "repos")
	must(t, os.Mkdir(root, 0o700))
	path = filepath.Join(root, "demo")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = path
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Seed", "GIT_AUTHOR_EMAIL=seed@example.invalid", "GIT_COMMITTER_NAME=Seed", "GIT_COMMITTER_EMAIL=seed@example.invalid"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	must(t, os.Mkdir(path, 0o700))
	git("init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(path, "README"), []byte("demo\n"), 0o600))
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	return root, path, git("rev-parse", "HEAD")
}

func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

type codingJob struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	FailureCode  string `json:"failure_code"`
	CandidateSHA string `json:"candidate_sha"`
	AttemptCount int    `json:"attempt_count"`
}

// TestCodingJobsWithAnIndependentPlugin runs coding jobs through a real
// Gate, sandboxed Worker and git repository with a Python workspace_edit
// plugin: a clean edit becomes a candidate commit on the base; every way
// of touching Git state or breaking the result ends the job with the
// documented code; the repository's branches and config are never
// changed. Writing the repository's objects, refs or config is refused by
// the sandbox itself: git fails, the plugin exits non-zero without a
// result, a protocol failure (plugin-protocol-v1.md), so each attempt is
// plugin_protocol_violation. TestWorkspaceViolationsAreUndone shows the
// Worker's own checks catch the same writes when nothing refuses them.
func TestCodingJobsWithAnIndependentPlugin(t *testing.T) {
	t.Parallel()
	root, repo, base := gitRepo(t)
	_, other, otherBase := gitRepo(t) // a repository the plugin points its worktree at
	plugin, err := filepath.Abs(filepath.Join("..", "..", "testdata", "acceptance", "edit-plugin.py"))
	must(t, err)
	g := newGate(t, gateOpts{codingRepo: true, maxAttempts: 2, retryBase: "50ms"})
	w := g.startWorker(t, workerOpts{plugins: map[string]string{"edit": plugin}, repoRoot: root, repoPath: repo})
	config, err := os.ReadFile(filepath.Join(repo, ".git", "config"))
	must(t, err)

	submit := func(instruction string, tests [][]string) string {
		t.Helper()
		task := map[string]any{"repository_id": "demo", "base_sha": base, "instruction": instruction}
		if tests != nil {
			task["tests"] = tests
		}
		b, _ := json.Marshal(task)
		return g.submit(t, string(b))
	}
	type want struct {
		status, jobCode, attemptCode string
		attempts                     int
	}
	cases := []struct {
		instruction string
		tests       [][]string
		want        want
	}{
		{"write hello " + marker, [][]string{{"true"}, {"sh", "-c", "test -f notes.txt"}}, want{"succeeded", "", "", 1}},
		{"write failing check", [][]string{{"sh", "-c", "echo " + marker + "; exit 3"}}, want{"failed", "scoped_test_failed", "scoped_test_failed", 1}},
		{"nothing", nil, want{"failed", "empty_change", "empty_change", 1}},
		{"commit", nil, want{"failed", "max_attempts_exceeded", "plugin_protocol_violation", 2}},
		{"git-config", nil, want{"failed", "max_attempts_exceeded", "plugin_protocol_violation", 2}},
		{"new-ref", nil, want{"failed", "max_attempts_exceeded", "plugin_protocol_violation", 2}},
		{"symlink-out", nil, want{"failed", "workspace_violation", "workspace_violation", 1}},
		{"symlink-dir-out", nil, want{"failed", "workspace_violation", "workspace_violation", 1}},
		{"dotgit-other " + other, nil, want{"failed", "workspace_violation", "workspace_violation", 1}},
		{"bad-subject", nil, want{"failed", "max_attempts_exceeded", "plugin_protocol_violation", 2}},
		{"report-unselected", nil, want{"failed", "max_attempts_exceeded", "plugin_protocol_violation", 2}},
		{"unknown-word", nil, want{"failed", "max_attempts_exceeded", "plugin_failed", 2}},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = submit(c.instruction, c.tests)
	}
	for i, c := range cases {
		g.waitTerminal(t, ids[i])
		r := g.do(t, "GET", "/v1/jobs/"+ids[i], nil, g.bearer())
		var j codingJob
		must(t, json.Unmarshal(r.body, &j))
		a := g.aggregate(t, ids[i])
		if j.Status != c.want.status || j.FailureCode != c.want.jobCode || len(a.Attempts) != c.want.attempts {
			t.Errorf("%s: job %+v with attempts %+v, want %+v", c.instruction, j, a.Attempts, c.want)
			continue
		}
		for _, at := range a.Attempts {
			if at.FailureCode != c.want.attemptCode {
				t.Errorf("%s: attempt %+v, want %s", c.instruction, at, c.want.attemptCode)
			}
		}
		if c.want.status == "succeeded" {
			if len(j.CandidateSHA) != 40 {
				t.Fatalf("candidate %q", j.CandidateSHA)
			}
			if p := gitOut(t, repo, "rev-parse", j.CandidateSHA+"^"); p != base {
				t.Errorf("candidate parent %s, want base %s", p, base)
			}
			if s := gitOut(t, repo, "log", "-1", "--format=%s", j.CandidateSHA); s != "feat: add notes" {
				t.Errorf("candidate subject %q", s)
			}
			if n := gitOut(t, repo, "show", j.CandidateSHA+":notes.txt"); n != "hello "+marker {
				t.Errorf("candidate notes.txt %q", n)
			}
		}
		if c.want.jobCode == "scoped_test_failed" && len(a.Attempts[0].Evidence) == 0 {
			t.Errorf("%s: no evidence recorded", c.instruction)
		}
	}
	// main never moved, no branch was added (violations are undone: F7);
	// worktrees were cleaned.
	if h := gitOut(t, repo, "rev-parse", "refs/heads/main"); h != base {
		t.Errorf("main moved to %s", h)
	}
	if b := gitOut(t, repo, "for-each-ref", "--format=%(refname)", "refs/heads/"); b != "refs/heads/main" {
		t.Errorf("branches: %q", b)
	}
	if h := gitOut(t, other, "for-each-ref", "--format=%(objectname) %(refname)"); h != otherBase+" refs/heads/main" {
		t.Errorf("the other repository was written: %q", h)
	}
	if now, err := os.ReadFile(filepath.Join(repo, ".git", "config")); err != nil || !bytes.Equal(now, config) {
		t.Errorf("the repository's config changed (%v):\n%s", err, now)
	}
	if ents, _ := os.ReadDir(filepath.Join(w.dir, "worktrees")); len(ents) != 0 {
		t.Errorf("worktrees left behind: %d", len(ents))
	}
	// Check output and instructions never reach the aggregate or logs.
	for _, id := range ids {
		r := g.do(t, "GET", "/v1/jobs/"+id+"/aggregate", nil, g.bearer())
		if strings.Contains(string(r.body), marker) {
			t.Errorf("aggregate of %s contains task text or check output", id)
		}
	}
	if strings.Contains(w.logs.String(), marker) || strings.Contains(w.logs.String(), repo) {
		t.Error("worker log contains task text, check output or the repository path")
	}
	g.assertNoSecrets(t, marker, repo)
}

// TestCodingWorkerCrashMidPlugin: the Worker is SIGKILLed while a coding
// plugin edits its worktree; restarted on the same state directories, it
// removes the stale worktree, and the retry produces the candidate.
func TestCodingWorkerCrashMidPlugin(t *testing.T) {
	t.Parallel()
	root, repo, base := gitRepo(t)
	plugin, err := filepath.Abs(filepath.Join("..", "..", "testdata", "acceptance", "edit-plugin.py"))
	must(t, err)
	g := newGate(t, gateOpts{codingRepo: true, maxAttempts: 2, leaseTTL: "1s", retryBase: "50ms"})
	flags := readableDir(t)
	opts := workerOpts{plugins: map[string]string{"edit": plugin}, repoRoot: root, repoPath: repo, readPaths: []string{flags}}
	w := g.startWorker(t, opts)
	// The first attempt waits on its "sleep <marker>" child; the flag,
	// raised once the test has seen it, makes the retry write at once.
	m, flag := newMarker(t), filepath.Join(flags, "flag")
	b, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": base, "instruction": "slow-write " + m + " " + flag})
	id := g.submit(t, string(b))
	pids := waitMarked(t, m, 1)
	t.Cleanup(func() { killAll(pids) })
	raise(t, flag)
	w.kill()
	if n := strings.Count(gitOut(t, repo, "worktree", "list"), "\n"); n != 1 {
		t.Fatalf("expected the crashed attempt's worktree to be registered, got %d extra lines", n)
	}
	if left := waitGone(pids, 20*time.Second); len(left) != 0 {
		t.Fatalf("plugin processes %v outlived the SIGKILLed Worker", left)
	}
	opts.dir = w.dir
	g.startWorker(t, opts)
	g.waitTerminal(t, id)
	r := g.do(t, "GET", "/v1/jobs/"+id, nil, g.bearer())
	var j codingJob
	must(t, json.Unmarshal(r.body, &j))
	if j.Status != "succeeded" || j.AttemptCount != 2 || len(j.CandidateSHA) != 40 {
		t.Fatalf("job %s", r.body)
	}
	if l := gitOut(t, repo, "worktree", "list"); strings.Contains(l, "\n") {
		t.Fatalf("stale worktrees after restart:\n%s", l)
	}
	if ents, _ := os.ReadDir(filepath.Join(w.dir, "worktrees")); len(ents) != 0 {
		t.Fatalf("worktree directories left: %d", len(ents))
	}
}

// TestScopedCheckDescendantsAreReaped: a sandboxed scoped check that
// leaves an ordinary and a setsid background process behind passes, and
// neither process outlives the attempt. The check fails unless both
// started; the test finds them in /proc (by their "sleep <marker>") while
// the check waits for its flag, then lets it exit.
func TestScopedCheckDescendantsAreReaped(t *testing.T) {
	t.Parallel()
	root, repo, base := gitRepo(t)
	plugin, err := filepath.Abs(filepath.Join("..", "..", "testdata", "acceptance", "edit-plugin.py"))
	must(t, err)
	g := newGate(t, gateOpts{codingRepo: true, maxAttempts: 1})
	flags := readableDir(t)
	g.startWorker(t, workerOpts{plugins: map[string]string{"edit": plugin}, repoRoot: root, repoPath: repo, readPaths: []string{flags}})
	m, flag := newMarker(t), filepath.Join(flags, "flag")
	script := "sleep " + m + " & a=$!; setsid sleep " + m + " & b=$!; " +
		"test -d /proc/$a && test -d /proc/$b || exit 7; " +
		"i=0; until cat " + flag + " >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 1200 ] || exit 8; sleep 0.05; done; exit 0"
	b, _ := json.Marshal(map[string]any{"repository_id": "demo", "base_sha": base, "instruction": "write x", "tests": [][]string{{"sh", "-c", script}}})
	id := g.submit(t, string(b))
	pids := waitMarked(t, m, 2) // both sleeps, then the check's shell
	t.Cleanup(func() { killAll(pids) })
	raise(t, flag)
	if j := g.waitTerminal(t, id); j.Status != "succeeded" {
		t.Fatalf("job %+v", j)
	}
	if left := waitGone(pids, 20*time.Second); len(left) != 0 {
		t.Fatalf("check processes %v outlived the attempt", left)
	}
}

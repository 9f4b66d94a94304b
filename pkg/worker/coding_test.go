package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// codingFixture is a Worker config with a real repository, worktree and
// runtime roots, and the edit plugin (testdata/edit-plugin) built once.
type codingFixture struct {
	t       *testing.T
	root    string
	repo    string
	base    string // commit on main
	side    string // commit not on main
	cfg     *Config
	plugin  string
	batches [][]json.RawMessage
	failAt  int                   // bind fails for this batch number (0: never)
	reaper  *supervise.ReaperPool // runs plugins and checks (nil: none)
	secrets *secretscan.Set       // CodingOptions.Secrets (nil: none)
}

const codingSecret = "sk-live-THIS-MUST-NEVER-LEAVE"

// editPlugin is testdata/edit-plugin built once per test binary run (a go
// build of it costs about a second even when cached, and some twenty
// tests use it); TestMain removes its directory.
var editPlugin struct {
	once      sync.Once
	dir, path string
	out       []byte
	err       error
}

func buildEditPlugin(t *testing.T) string {
	t.Helper()
	editPlugin.once.Do(func() {
		if editPlugin.dir, editPlugin.err = os.MkdirTemp("", "worker-edit-plugin-"); editPlugin.err != nil {
			return
		}
		editPlugin.path = filepath.Join(editPlugin.dir, "edit-plugin")
		cmd := exec.Command("go", "build", "-o", editPlugin.path, "./testdata/edit-plugin")
		cmd.Dir = "../.."
		editPlugin.out, editPlugin.err = cmd.CombinedOutput()
	})
	if editPlugin.err != nil {
		t.Fatalf("build edit plugin: %v\n%s", editPlugin.err, editPlugin.out)
	}
	return editPlugin.path
}

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Seed", "GIT_AUTHOR_EMAIL=seed@example.invalid",
		"GIT_COMMITTER_NAME=Seed", "GIT_COMMITTER_EMAIL=seed@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func newCodingFixture(t *testing.T, plugin string) *codingFixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &codingFixture{t: t, root: root, plugin: plugin}
	repos := filepath.Join(root, "repos")
	f.repo = filepath.Join(repos, "demo")
	for _, d := range []string{repos, filepath.Join(root, "worktrees"), filepath.Join(root, "runtime")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, repos, "init", "-q", "-b", "main", f.repo)
	os.WriteFile(filepath.Join(f.repo, "README"), []byte("demo\n"), 0o644)
	gitT(t, f.repo, "add", "-A")
	gitT(t, f.repo, "commit", "-q", "-m", "base")
	f.base = gitT(t, f.repo, "rev-parse", "HEAD")
	gitT(t, f.repo, "checkout", "-q", "-b", "side")
	os.WriteFile(filepath.Join(f.repo, "SIDE"), []byte("side\n"), 0o644)
	gitT(t, f.repo, "add", "-A")
	gitT(t, f.repo, "commit", "-q", "-m", "side")
	f.side = gitT(t, f.repo, "rev-parse", "HEAD")
	gitT(t, f.repo, "checkout", "-q", "main")
	f.cfg = &Config{
		Sandbox: SandboxNone, // see hostFixture
		ID:      "worker-1", Concurrency: 1, HeartbeatInterval: time.Second,
		RepositoryRoots:           []string{repos},
		WorktreeRoot:              filepath.Join(root, "worktrees"),
		RuntimeRoot:               filepath.Join(root, "runtime"),
		Repositories:              []Repository{{ID: "demo", Path: f.repo}},
		Plugins:                   []Plugin{{ID: "edit", Argv: []string{plugin}}},
		EnvironmentAllowlist:      []string{"PATH"},
		CheckEnvironmentAllowlist: []string{"PATH"},
		Ceilings: Ceilings{PluginTimeout: time.Hour, CheckTimeout: time.Hour, GitTimeout: time.Hour,
			CleanupTimeout: time.Minute, PluginOutputBytes: 1 << 26, CheckOutputBytes: 1 << 26, GitOutputBytes: 1 << 26},
	}
	return f
}

func codingPolicy(t testing.TB, edit func(*policy.Execution)) []byte {
	t.Helper()
	e := policy.Execution{PluginID: "edit", Environment: []string{"PATH"},
		PluginTimeout: policy.Duration(time.Minute), CheckTimeout: policy.Duration(time.Minute),
		GitTimeout: policy.Duration(time.Minute), CleanupTimeout: policy.Duration(5 * time.Second),
		PluginOutputBytes: 1 << 20, CheckOutputBytes: 64, GitOutputBytes: 1 << 20}
	if edit != nil {
		edit(&e)
	}
	l := policy.Lifecycle{LeaseTTL: policy.Duration(time.Minute), RetryBase: policy.Duration(time.Second), MaxAttempts: 3}
	p := policy.Resolve(l, e)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p.Canonical()
}

func (f *codingFixture) lease(task wire.CodingTask, pol []byte) *wire.Lease {
	f.t.Helper()
	if task.RepositoryID == "" {
		task.RepositoryID = "demo"
	}
	if task.BaseSHA == "" {
		task.BaseSHA = f.base
	}
	b, err := json.Marshal(task)
	if err != nil {
		f.t.Fatal(err)
	}
	if pol == nil {
		pol = codingPolicy(f.t, nil)
	}
	return &wire.Lease{JobID: "job1", AttemptID: "att1", Ordinal: 1, DeadlineAt: time.Now().Add(time.Hour),
		Kind: wire.KindCoding, Policy: pol, Task: b}
}

var codingEnv = map[string]string{"PATH": "/usr/bin:/bin", "SECRET_TOKEN": codingSecret}

func (f *codingFixture) run(l *wire.Lease) Report {
	f.t.Helper()
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv), Reaper: f.reaper,
		Now: func() time.Time { return time.Unix(1_700_000_000, 0) }, Secrets: f.secrets})
	if err != nil {
		f.t.Fatal(err)
	}
	f.batches = nil
	return x.Execute(context.Background(), &Attempt{Lease: l, Bind: func(_ context.Context, n int, recs []json.RawMessage) error {
		if n == f.failAt {
			return errors.New("refused")
		}
		if n != len(f.batches)+1 {
			f.t.Fatalf("batch %d out of order", n)
		}
		f.batches = append(f.batches, recs)
		return nil
	}})
}

// records decodes the bound batches after validating each with the
// evidence contract.
func (f *codingFixture) records(opt evidence.Options) [][]evidence.Record {
	f.t.Helper()
	var out [][]evidence.Record
	for i, b := range f.batches {
		if _, err := evidence.ValidateBatch(i+1, b, opt); err != nil {
			f.t.Fatalf("batch %d invalid: %v", i+1, err)
		}
		var rs []evidence.Record
		for _, r := range b {
			if bytes.Contains(r, []byte(codingSecret)) || bytes.Contains(r, []byte(f.root)) {
				f.t.Fatalf("evidence leaks a value: %s", r)
			}
			var rec evidence.Record
			if err := json.Unmarshal(r, &rec); err != nil {
				f.t.Fatal(err)
			}
			rs = append(rs, rec)
		}
		out = append(out, rs)
	}
	return out
}

// assertClean checks that no worktree, registration or private
// directory is left behind.
func (f *codingFixture) assertClean() {
	f.t.Helper()
	for _, d := range []string{f.cfg.WorktreeRoot, f.cfg.RuntimeRoot} {
		ents, err := os.ReadDir(d)
		if err != nil || len(ents) != 0 {
			f.t.Fatalf("%s not empty after the attempt: %d entries", filepath.Base(d), len(ents))
		}
	}
	if list := gitT(f.t, f.repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		f.t.Fatalf("worktree registrations remain:\n%s", list)
	}
}

func (f *codingFixture) expectFailure(r Report, code string, phase evidence.Phase, reason evidence.Reason) {
	f.t.Helper()
	if r.Succeeded || r.Code != code || r.Cancelled {
		f.t.Fatalf("report %+v, want failure %s", r, code)
	}
	recs := f.records(evidence.Options{})
	if len(recs) != 1 {
		f.t.Fatalf("%d batches", len(recs))
	}
	last := recs[0][len(recs[0])-1]
	if last.Phase != phase || last.Reason != reason {
		f.t.Fatalf("last record %s/%s, want %s/%s", last.Phase, last.Reason, phase, reason)
	}
	if out := gitT(f.t, f.repo, "for-each-ref", CandidatePrefix); out != "" {
		f.t.Fatalf("a failed attempt left a candidate ref: %s", out)
	}
	f.assertClean()
}

func TestCodingPipeline(t *testing.T) {
	plugin := buildEditPlugin(t)

	t.Run("success", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		l := f.lease(wire.CodingTask{
			Instruction: "write hello.txt hi\nsubject feat: add hello\nreport Added a greeting|hello.txt: new file",
			Tests:       [][]string{{"sh", "-c", "test -f hello.txt"}, {"grep", "-q", "hi", "hello.txt"}},
		}, nil)
		r := f.run(l)
		if !r.Succeeded || r.CandidateSHA == "" {
			t.Fatalf("report %+v", r)
		}
		if r.AgentReport == nil || r.AgentReport.Summary != "Added a greeting" || len(r.AgentReport.Changes) != 1 {
			t.Fatalf("agent report %+v", r.AgentReport)
		}
		recs := f.records(evidence.Options{ArgCounts: []int{3, 4}, BaseSHA: f.base})
		if len(recs) != 1 || len(recs[0]) != 3 {
			t.Fatalf("records %+v", recs)
		}
		for i, c := range recs[0][:2] {
			if c.Reason != evidence.ReasonPassed || *c.Index != i || c.SHA != r.CandidateSHA || *c.Output != "" {
				t.Fatalf("check record %d: %+v", i, c)
			}
		}
		if c := recs[0][2]; c.Phase != evidence.PhaseCandidateCommit || c.SHA != r.CandidateSHA {
			t.Fatalf("candidate record %+v", c)
		}
		ref := CandidateRef("job1", "att1")
		if got := gitT(t, f.repo, "rev-parse", ref); got != r.CandidateSHA {
			t.Fatalf("ref %s, candidate %s", got, r.CandidateSHA)
		}
		if got := gitT(t, f.repo, "rev-parse", r.CandidateSHA+"^"); got != f.base {
			t.Fatal("parent is not the base")
		}
		if got := gitT(t, f.repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", r.CandidateSHA); got != "Agent Forge <forge@example.invalid>|Agent Forge <forge@example.invalid>|feat: add hello" {
			t.Fatalf("identities/subject: %s", got)
		}
		if got := gitT(t, f.repo, "show", r.CandidateSHA+":hello.txt"); got != "hi" {
			t.Fatalf("content %q", got)
		}
		f.assertClean()
		gitT(t, f.repo, "reflog", "expire", "--expire=now", "--all")
		gitT(t, f.repo, "gc", "-q", "--prune=now")
		if got := gitT(t, f.repo, "rev-parse", ref); got != r.CandidateSHA {
			t.Fatal("ref lost after gc")
		}
		gitT(t, f.repo, "cat-file", "-e", r.CandidateSHA+"^{commit}")
	})

	t.Run("concurrent attempts on one repository", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
		if err != nil {
			t.Fatal(err)
		}
		reports := make(chan Report, 4)
		for i := 0; i < 4; i++ {
			l := f.lease(wire.CodingTask{Instruction: fmt.Sprintf("write f%d.txt %d", i, i), Tests: [][]string{{"true"}}}, nil)
			l.AttemptID = fmt.Sprintf("att%d", i)
			go func() {
				reports <- x.Execute(context.Background(), &Attempt{Lease: l, Bind: func(context.Context, int, []json.RawMessage) error { return nil }})
			}()
		}
		for i := 0; i < 4; i++ {
			if r := <-reports; !r.Succeeded {
				t.Fatalf("a concurrent attempt failed: %+v", r)
			}
		}
		if n := strings.Count(gitT(t, f.repo, "for-each-ref", CandidatePrefix), "\n") + 1; n != 4 {
			t.Fatalf("%d candidate refs", n)
		}
		f.assertClean()
	})

	t.Run("author identity and default subject", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a",
			CommitAuthorName: "Ada Lovelace", CommitAuthorEmail: "ada@example.org"}, nil))
		if !r.Succeeded || r.AgentReport != nil {
			t.Fatalf("report %+v", r)
		}
		if got := gitT(t, f.repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", r.CandidateSHA); got != "Ada Lovelace <ada@example.org>|Agent Forge <forge@example.invalid>|chore: apply coding task" {
			t.Fatalf("identities/subject: %s", got)
		}
		if recs := f.records(evidence.Options{ArgCounts: []int{}}); len(recs[0]) != 1 {
			t.Fatalf("no checks means one candidate record: %+v", recs)
		}
	})

	t.Run("identity git would alter is refused at submission", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a",
			CommitAuthorName: "Ada.", CommitAuthorEmail: "ada@example.org"}, nil))
		f.expectFailure(r, CodeInvalidTask, evidence.PhasePreparation, evidence.ReasonInvalidTask)
	})

	t.Run("failing check is redacted, base-bound and stops the run", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		marker := filepath.Join(t.TempDir(), "second-ran")
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a",
			Tests: [][]string{
				{"sh", "-c", "echo token=$SECRET_TOKEN " + codingSecret + "; head -c 500 /dev/zero; exit 3"},
				{"touch", marker},
			}}, nil))
		f.expectFailure(r, CodeScopedTestFailed, evidence.PhaseScopedCheck, evidence.ReasonFailed)
		c := f.records(evidence.Options{BaseSHA: f.base})[0][0]
		if *c.ExitCode != 3 || c.SHA != f.base || *c.Output != evidence.Redacted || !*c.OutputRedacted || !*c.OutputTruncated || *c.ArgCount != 3 {
			t.Fatalf("check record %+v", c)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a check ran after a failure")
		}
	})

	t.Run("check environment is restricted and private", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		dump := filepath.Join(t.TempDir(), "env")
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a",
			Tests: [][]string{{"sh", "-c", "env > " + dump + "; pwd >> " + dump + "; test -d \"$HOME\" && test -d \"$TMPDIR\" && test -d \"$XDG_CACHE_HOME\""}}}, nil))
		if !r.Succeeded {
			t.Fatalf("report %+v", r)
		}
		b, err := os.ReadFile(dump)
		if err != nil {
			t.Fatal(err)
		}
		env := string(b)
		if strings.Contains(env, codingSecret) || strings.Contains(env, "SECRET_TOKEN") {
			t.Fatal("a variable outside the check allowlist reached the check")
		}
		for _, want := range []string{"PATH=/usr/bin:/bin", "HOME=" + f.cfg.RuntimeRoot + "/check-", "TMPDIR=" + f.cfg.RuntimeRoot + "/check-", "XDG_CACHE_HOME=" + f.cfg.RuntimeRoot + "/check-", f.cfg.WorktreeRoot + "/wt-"} {
			if !strings.Contains(env, want) {
				t.Fatalf("check environment lacks %q:\n%s", want, env)
			}
		}
		f.assertClean()
	})

	t.Run("timed out check", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		pol := codingPolicy(t, func(e *policy.Execution) { e.CheckTimeout = policy.Duration(100 * time.Millisecond) })
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a", Tests: [][]string{{"sleep", "30"}}}, pol))
		f.expectFailure(r, CodeScopedTestFailed, evidence.PhaseScopedCheck, evidence.ReasonTimedOut)
	})

	t.Run("missing check program", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a", Tests: [][]string{{"no-such-program-here"}}}, nil))
		f.expectFailure(r, CodeScopedTestFailed, evidence.PhaseScopedCheck, evidence.ReasonSpawnFailed)
	})

	for _, tc := range []struct {
		name        string
		instruction string
		code        string
		phase       evidence.Phase
		reason      evidence.Reason
	}{
		{"empty change", "subject nothing to do", wire.FailureEmptyChange, evidence.PhaseWorkspaceValidation, evidence.ReasonEmptyChange},
		{"symlink out of the tree", "symlink out ../../../../etc/passwd", wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonPathEscape},
		{"absolute symlink", "symlink out /etc/passwd", wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonPathEscape},
		{"symlink into git metadata", "symlink g .git/config", wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonPathEscape},
		{"repository config changed", "write a.txt a\ngitfile config [core]", wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonConfigChanged},
		{"hook added", "write a.txt a\ngitfile hooks/pre-commit #!/bin/sh", wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonConfigChanged},
		{"plugin failure", "fail", CodePluginFailed, evidence.PhasePlugin, evidence.ReasonPluginFailed},
		{"plugin rejects the request", "unknown-command", CodePluginFailed, evidence.PhasePlugin, evidence.ReasonPluginFailed},
		{"plugin misconfigured", "incompatible", CodePluginIncompatible, evidence.PhasePlugin, evidence.ReasonPluginFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			f.expectFailure(f.run(f.lease(wire.CodingTask{Instruction: tc.instruction}, nil)), tc.code, tc.phase, tc.reason)
		})
	}

	t.Run("ref created", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a\ngitfile refs/heads/evil " + f.side}, nil))
		f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonRefsChanged)
	})

	t.Run("head moved", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a\nhead " + f.side}, nil))
		f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonHeadMoved)
	})

	t.Run("preparation failures", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		cases := []struct {
			name   string
			task   wire.CodingTask
			cfg    func(*Config)
			code   string
			reason evidence.Reason
		}{
			{"unknown repository", wire.CodingTask{RepositoryID: "other"}, nil, wire.FailureRepositoryUnavailable, evidence.ReasonUnknownRepository},
			{"base missing", wire.CodingTask{BaseSHA: strings.Repeat("ab", 20)}, nil, wire.FailureInvalidBase, evidence.ReasonBaseMissing},
			{"base not on the default branch", wire.CodingTask{BaseSHA: f.side}, nil, wire.FailureInvalidBase, evidence.ReasonBaseNotOnDefaultBranch},
			{"no repository roots", wire.CodingTask{}, func(c *Config) { c.RepositoryRoots = nil }, wire.FailureRepositoryUnavailable, evidence.ReasonNoRepositoryRoots},
			{"unknown plugin", wire.CodingTask{}, func(c *Config) { c.Plugins = nil }, CodeUnknownPlugin, evidence.ReasonPolicyRejected},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				saved := *f.cfg
				if tc.cfg != nil {
					tc.cfg(f.cfg)
				}
				defer func() { *f.cfg = saved }()
				tc.task.Instruction = "write a.txt a"
				f.expectFailure(f.run(f.lease(tc.task, nil)), tc.code, evidence.PhasePreparation, tc.reason)
			})
		}
	})

	t.Run("repository path drift", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		moved := f.repo + "-moved"
		if err := os.Rename(f.repo, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, f.repo); err != nil {
			t.Fatal(err)
		}
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil))
		if r.Code != wire.FailureRepositoryUnavailable || f.records(evidence.Options{})[0][0].Reason != evidence.ReasonRepositoryPathDrift {
			t.Fatalf("report %+v", r)
		}
	})

	t.Run("default branch named by Gate", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		l := f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil)
		l.DefaultBranch = "side"
		f.expectFailure(f.run(l), wire.FailureDefaultBranchMismatch, evidence.PhasePreparation, evidence.ReasonDefaultBranchMismatch)
		l.DefaultBranch = "main"
		if r := f.run(l); !r.Succeeded {
			t.Fatalf("matching default branch: %+v", r)
		}
	})

	t.Run("detached default branch", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		gitT(t, f.repo, "checkout", "-q", "--detach", "HEAD")
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil))
		f.expectFailure(r, wire.FailureDefaultBranchMismatch, evidence.PhasePreparation, evidence.ReasonDefaultBranchMismatch)
	})

	t.Run("unbound evidence claims nothing and still cleans up", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		f.failAt = 1
		r := f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a"}, nil))
		if r.Succeeded || r.CandidateSHA != "" || r.Code != codeCodingRetryable {
			t.Fatalf("report %+v", r)
		}
		f.assertClean()
	})

	t.Run("cleanup failure is a second batch", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		// A file cleanup cannot remove: the plugin waits while the test
		// pins one in its workspace (undeletable: immutable as root,
		// else a read-only worktree_root).
		fifo := filepath.Join(f.root, "pin")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan Report, 1)
		go func() { done <- f.run(f.lease(wire.CodingTask{Instruction: "write a.txt a\nawait " + fifo}, nil)) }()
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := filepath.Glob(filepath.Join(f.cfg.WorktreeRoot, "wt-*", "tree", "a.txt"))
		if len(ents) != 1 {
			t.Fatalf("workspace files %v", ents)
		}
		unpin := pinFile(t, ents[0], f.cfg.WorktreeRoot)
		w.Close()
		r := <-done
		unpin()
		if !r.Succeeded {
			t.Fatalf("report %+v", r)
		}
		recs := f.records(evidence.Options{})
		if len(recs) != 2 || recs[1][0].Phase != evidence.PhaseCleanup {
			t.Fatalf("batches %+v", recs)
		}
	})

	t.Run("cancelled attempt binds nothing and cleans up", func(t *testing.T) {
		f := newCodingFixture(t, plugin)
		x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		var once sync.Once
		go func() { <-started; cancel() }()
		bound := 0
		r := x.Execute(ctx, &Attempt{Lease: f.lease(wire.CodingTask{Instruction: "wait"}, nil),
			Bind: func(context.Context, int, []json.RawMessage) error { bound++; return nil },
			Observe: func(e Event) {
				if e.Kind == EventPluginStarted {
					once.Do(func() { close(started) })
				}
			}})
		if !r.Cancelled || r.Succeeded || bound != 0 {
			t.Fatalf("report %+v, %d batches", r, bound)
		}
		f.assertClean()
	})
}

// pinFile makes p undeletable until the returned func runs: immutable as
// root, else by making dir (a parent) read-only.
func pinFile(t *testing.T, p, dir string) func() {
	t.Helper()
	const fsIOCSetFlags, fsImmutable = 0x40086602, 0x10
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		return func() { os.Chmod(dir, 0o700) }
	}
	set := func(flags int32) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIOCSetFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
			t.Fatalf("immutable flag: %v", e)
		}
	}
	set(fsImmutable)
	return func() { set(0) }
}

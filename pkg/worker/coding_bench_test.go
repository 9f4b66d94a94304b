package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// benchRepo makes a bare repository whose main branch has one commit of
// n files (100 bytes each, 100 per directory), via git fast-import.
func benchRepo(b *testing.B, dir string, n int) string { return benchRepoOf(b, dir, n, false) }

// benchRepoOf is benchRepo; with unique, every file's content differs (n
// distinct blobs, as a transfer of a real repository carries).
func benchRepoOf(b *testing.B, dir string, n int, unique bool) string {
	b.Helper()
	repo := filepath.Join(dir, "big.git")
	run := func(stdin []byte, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git %v: %v\n%s", args[:2], err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(nil, "init", "-q", "--bare", "-b", "main", repo)
	var s bytes.Buffer
	s.WriteString("commit refs/heads/main\ncommitter Seed <seed@example.invalid> 1700000000 +0000\ndata 4\nbase\n")
	body := strings.Repeat("x", 99) + "\n"
	for i := 0; i < n; i++ {
		if unique {
			body = fmt.Sprintf("%05d", i) + strings.Repeat("x", 94) + "\n"
		}
		fmt.Fprintf(&s, "M 100644 inline d%03d/f%05d.txt\ndata %d\n%s\n", i/100, i, len(body), body)
	}
	run(s.Bytes(), "--git-dir="+repo, "fast-import", "--quiet")
	return repo
}

// BenchmarkCodingOverhead compares the Worker's per-job git overhead
// (preparation with base checks and worktree, snapshots, validation with
// staging and path checks, commit, candidate ref, cleanup; no plugin, no
// checks) with the same work done by plain git commands (worktree add
// --detach, add -A, commit, update-ref, worktree remove), interleaved in
// one run on a 10,000-file repository. It reports the median of each and
// their ratio. Run with a small -benchtime, e.g. -benchtime 5x.
func BenchmarkCodingOverhead(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	repos := filepath.Join(root, "repos")
	for _, d := range []string{repos, filepath.Join(root, "wt"), filepath.Join(root, "rt"), filepath.Join(root, "plain")} {
		os.Mkdir(d, 0o700)
	}
	repo := benchRepo(b, repos, 10000)
	base := strings.TrimSpace(gitOut(b, repo, "rev-parse", "main"))
	cfg := &Config{
		Sandbox:         SandboxNone, // see hostFixture
		RepositoryRoots: []string{repos}, WorktreeRoot: filepath.Join(root, "wt"), RuntimeRoot: filepath.Join(root, "rt"),
		Repositories: []Repository{{ID: "big", Path: repo}}, Plugins: []Plugin{{ID: "edit", Argv: []string{"/bin/true"}}},
		EnvironmentAllowlist: []string{"PATH"},
		Ceilings: Ceilings{PluginTimeout: time.Hour, CheckTimeout: time.Hour, GitTimeout: time.Hour,
			CleanupTimeout: time.Minute, PluginOutputBytes: 1 << 26, CheckOutputBytes: 1 << 26, GitOutputBytes: 1 << 26},
	}
	x, err := NewCodingExecutor(cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		b.Fatal(err)
	}
	task := []byte(`{"repository_id":"big","base_sha":"` + base + `","instruction":"edit"}`)
	pol := codingPolicy(b, nil)
	ctx := context.Background()

	worker := func(i int) time.Duration {
		lease := &wire.Lease{JobID: "bench", AttemptID: fmt.Sprintf("w%d", i), Ordinal: 1, Kind: wire.KindCoding, Policy: pol, Task: task}
		j := &codingJob{x: x, lease: lease}
		start := time.Now()
		if _, ok := j.prepare(ctx); !ok {
			b.Fatalf("prepare: %+v", j.records)
		}
		before, err := j.snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		edit := time.Now()
		if err := os.WriteFile(filepath.Join(j.wt, "d000", "f00000.txt"), []byte(fmt.Sprintf("edit %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		editTime := time.Since(edit)
		tree, _, ok := j.validate(ctx, before)
		if !ok {
			b.Fatalf("validate: %+v", j.records)
		}
		if _, _, ok := j.commit(ctx, tree, nil); !ok {
			b.Fatalf("commit: %+v", j.records)
		}
		if err := j.cleanup(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start) - editTime
	}
	plain := func(i int) time.Duration {
		wt := filepath.Join(root, "plain", fmt.Sprintf("p%d", i))
		start := time.Now()
		gitOut(b, repo, "worktree", "add", "-q", "--detach", wt, base)
		edit := time.Now()
		if err := os.WriteFile(filepath.Join(wt, "d000", "f00000.txt"), []byte(fmt.Sprintf("edit %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		editTime := time.Since(edit)
		gitOut(b, wt, "add", "-A")
		gitOut(b, wt, "commit", "-q", "-m", "chore: apply coding task")
		sha := strings.TrimSpace(gitOut(b, wt, "rev-parse", "HEAD"))
		gitOut(b, repo, "update-ref", "refs/plain/"+fmt.Sprint(i), sha)
		gitOut(b, repo, "worktree", "remove", "--force", wt)
		return time.Since(start) - editTime
	}

	// Warm the page cache once for both paths.
	worker(-1)
	plain(-1)
	var ws, ps []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			ws = append(ws, worker(i))
			ps = append(ps, plain(i))
		} else {
			ps = append(ps, plain(i))
			ws = append(ws, worker(i))
		}
	}
	b.StopTimer()
	mw, mp := median(ws), median(ps)
	b.ReportMetric(float64(mw.Microseconds())/1000, "worker-median-ms")
	b.ReportMetric(float64(mp.Microseconds())/1000, "plain-median-ms")
	b.ReportMetric(float64(mw)/float64(mp), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func gitOut(b *testing.B, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Agent Forge", "GIT_AUTHOR_EMAIL=forge@example.invalid",
		"GIT_COMMITTER_NAME=Agent Forge", "GIT_COMMITTER_EMAIL=forge@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("git %s: %v\n%s", args[0], err, out)
	}
	return string(out)
}

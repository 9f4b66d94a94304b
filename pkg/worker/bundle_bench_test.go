package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// BenchmarkPublicSourceTransfer measures what the bundle boundary costs a
// coding job on a 10,000-file public-source repository (10,000 distinct
// blobs of 100 bytes in 100 directories), through the
// production Gate in-process on a real listener: the Worker's preparation
// (the base fetched as a bundle into its cache, cold or warm, its own
// attempt repository borrowing the cache's objects, checkout of 10,000
// files, the private index) plus the candidate's return (bundle, upload,
// the Gate's verification in a scratch repository and its store), against
// `git clone --shared` of the Gate's prepared repository (a checkout over
// alternates, no object copied: what a Worker sharing the Gate's
// filesystem would pay). Cold rounds start from an empty cache; warm
// rounds find the previous base cached while upstream moved one commit
// (one changed file). Rounds alternate cold, clone, warm, clone, ...;
// each figure is the median of its rounds, and the base's fetch
// (fetch-*-ms) and the candidate's return (candidate-ms) are reported
// alone too, and so is the median of each round's difference between the
// job and the clone right after it (cold-extra-ms, warm-extra-ms: what
// the job costs beyond a clone, robust to the machine's drift across
// rounds). Run with -benchtime Nx (N rounds of each).
//
// The timed path is production's: one preparation, which fetches the base
// itself. The fetch alone is timed on a twin Worker (its own runtime root,
// whose cache sees the same fetches), so preparation never finds a base a
// measuring step put there. What a round deletes (the attempt's container,
// the clone) moves to a trash directory removed after the timed rounds:
// on an ext4 without a journal the inode allocator skips, one by one,
// every inode freed in the last minute or more, so 10,000 files deleted
// just before a timed 10,000-file checkout would slow that checkout
// tenfold, by an amount depending on which inode groups the two share
// (docs/performance.md).
func BenchmarkPublicSourceTransfer(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	sysGit, err := exec.LookPath("git")
	if err != nil {
		b.Fatal("git is required")
	}
	up := filepath.Join(root, "up", "octo-org")
	pub := filepath.Join(root, "public")
	trash := filepath.Join(root, "trash")
	for _, d := range []string{up, pub, trash, filepath.Join(root, "state"), filepath.Join(root, "wt"), filepath.Join(root, "rt"), filepath.Join(root, "rt2"), filepath.Join(root, "plain")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	upstream := benchRepoOf(b, up, 10000, true)
	if err := os.Rename(upstream, filepath.Join(up, "hello.git")); err != nil {
		b.Fatal(err)
	}
	upstream = filepath.Join(up, "hello.git")
	work := filepath.Join(root, "work")
	gitOut(b, root, "clone", "-q", upstream, work)
	wrapper := filepath.Join(root, "git")
	script := "#!/bin/sh\nexec '" + sysGit + "' -c url.file://" + filepath.Dir(up) + "/.insteadOf=https://github.com/ -c protocol.file.allow=always \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	exe := `{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"2m","check_timeout":"1m","git_timeout":"5m","cleanup_timeout":"30s","plugin_output_bytes":1048576,"check_output_bytes":64,"git_output_bytes":16777216}`
	conf := fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"50ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"5m","retry_base":"1s","max_attempts":1},"default_execution":%s,
 "public_repository_root":%q,"git_executable":%q,
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":1}],
 "repositories":[{"id":"pub","repository_url":%q,"default_branch":"main","worker_pool":"local","execution":%s}]}`,
		filepath.Join(root, "state", "forge.db"), exe, pub, wrapper, publicURL, exe)
	rg := startRealGate(b, []byte(conf), "")
	prepared := filepath.Join(pub, source.DirName(publicURL))
	cfg := &Config{
		GateURL: rg.url(), ID: "worker-1", Concurrency: 1, HeartbeatInterval: time.Second,
		WorktreeRoot: filepath.Join(root, "wt"), RuntimeRoot: filepath.Join(root, "rt"),
		Repositories: []Repository{{ID: "pub", Gate: true}}, Plugins: []Plugin{{ID: "edit", Argv: []string{"/bin/true"}}},
		EnvironmentAllowlist: []string{"PATH"},
		Ceilings: Ceilings{PluginTimeout: time.Hour, CheckTimeout: time.Hour, GitTimeout: time.Hour,
			CleanupTimeout: time.Minute, PluginOutputBytes: 1 << 26, CheckOutputBytes: 1 << 26, GitOutputBytes: 1 << 26},
	}
	x, err := NewCodingExecutor(cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		b.Fatal(err)
	}
	// twin fetches alone, into its own cache under rt2.
	twinCfg := *cfg
	twinCfg.RuntimeRoot = filepath.Join(root, "rt2")
	twin, err := NewCodingExecutor(&twinCfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		b.Fatal(err)
	}
	trashed := 0
	discard := func(dir string) {
		trashed++
		if err := os.Rename(dir, filepath.Join(trash, fmt.Sprint(trashed))); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	conn, err := wire.Dial(ctx, rg.url().String(), testToken)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Send(wire.Envelope{Type: wire.TypeHello, Hello: &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1",
		Plugins: []string{"edit"}, Repositories: []string{"pub"}}}); err != nil {
		b.Fatal(err)
	}
	welcome, err := conn.Receive()
	if err != nil || welcome.Welcome == nil {
		b.Fatalf("welcome %+v %v", welcome, err)
	}
	client := newHTTPClient()
	var seq uint64
	advance := func(i int) string {
		if err := os.WriteFile(filepath.Join(work, "d000", "f00000.txt"), []byte(fmt.Sprintf("upstream %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		gitOut(b, work, "commit", "-qam", "upstream")
		gitOut(b, work, "push", "-q", upstream, "HEAD:main")
		return strings.TrimSpace(gitOut(b, work, "rev-parse", "HEAD"))
	}
	// job submits a job on base and runs its attempt's transfer steps,
	// returning their time (preparation plus the candidate's return) and,
	// within it, the base's fetch and the candidate's return alone.
	job := func(base string) (total, fetch, sent time.Duration) {
		task, _ := json.Marshal(map[string]any{"repository_id": "pub", "base_sha": base, "instruction": "edit"})
		rg.api("POST", "/v1/jobs", task)
		e, err := conn.Receive()
		if err != nil || e.Lease == nil {
			b.Fatalf("lease %+v %v", e, err)
		}
		l := e.Lease
		bind := wire.AttemptBinding{Lane: welcome.Welcome.Lane, Generation: welcome.Welcome.Generation, JobID: l.JobID, AttemptID: l.AttemptID}
		link := newGateLink(cfg.GateURL, testToken, client, bind)
		j := &codingJob{x: x, lease: l, attempt: &Attempt{Lease: l, Gate: link}}
		start := time.Now()
		if _, ok := j.prepare(ctx); !ok {
			b.Fatalf("prepare: %+v", j.records)
		}
		prep := time.Since(start)
		before, err := j.snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(j.wt, "d001", "f00100.txt"), []byte("edit "+l.AttemptID+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		tree, _, ok := j.validate(ctx, before)
		if !ok {
			b.Fatalf("validate: %+v", j.records)
		}
		sha, _, ok := j.commit(ctx, tree, nil)
		if !ok {
			b.Fatalf("commit: %+v", j.records)
		}
		send := time.Now()
		if _, ok := j.sendCandidate(ctx, sha, tree); !ok {
			b.Fatalf("send: %+v", j.records)
		}
		sent = time.Since(send)
		// The fetch alone, as preparation ran it, on the twin (after the
		// timed path, so that never benefits from its warm-up).
		f := &codingJob{x: twin, lease: l, attempt: &Attempt{Lease: l, Gate: link}}
		if f.task, err = wire.DecodeCodingTask(l.Task); err != nil {
			b.Fatal(err)
		}
		if f.gitHome, err = os.MkdirTemp(twinCfg.RuntimeRoot, "git-"); err != nil {
			b.Fatal(err)
		}
		f.git = &gitx.Runner{Git: x.opt.Git, Home: f.gitHome, Timeout: 5 * time.Minute, OutputBytes: 1 << 24}
		start = time.Now()
		if _, err := f.ensureBase(ctx); err != nil {
			b.Fatal(err)
		}
		fetch = time.Since(start)
		os.RemoveAll(f.gitHome)
		discard(j.container)
		if err := j.cleanup(); err != nil {
			b.Fatal(err)
		}
		seq++
		if err := conn.Send(wire.Envelope{Type: wire.TypeResult, Seq: seq, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
			Outcome: wire.OutcomeFailed, Disposition: wire.DispositionTerminal, FailureCode: wire.FailureInvalidTask}}); err != nil {
			b.Fatal(err)
		}
		if a, err := conn.Receive(); err != nil || a.Type != wire.TypeAck {
			b.Fatalf("result answer %+v %v", a, err)
		}
		return prep + sent, fetch, sent
	}
	cold := func(base string) (time.Duration, time.Duration, time.Duration) {
		for _, rt := range []string{cfg.RuntimeRoot, twinCfg.RuntimeRoot} {
			if cache := CacheDir(rt, "pub"); func() bool { _, err := os.Stat(cache); return err == nil }() {
				discard(cache)
			}
		}
		return job(base)
	}
	clone := func(i int) time.Duration {
		dst := filepath.Join(root, "plain", fmt.Sprint(i))
		start := time.Now()
		gitOut(b, root, "clone", "-q", "--shared", prepared, dst)
		d := time.Since(start)
		discard(dst)
		return d
	}

	base := advance(-1)
	job(base) // prepares the Gate's repository and warms the page cache
	clone(-1)
	var cs, ws, pc, pw, fc, fw, ss, dc, dw []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, f, s := cold(base)
		cs, fc, ss = append(cs, t), append(fc, f), append(ss, s)
		pc = append(pc, clone(2*i))
		dc = append(dc, t-pc[i])
		base = advance(i)
		t, f, s = job(base)
		ws, fw, ss = append(ws, t), append(fw, f), append(ss, s)
		pw = append(pw, clone(2*i+1))
		dw = append(dw, t-pw[i])
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mc, mw, mpc, mpw := median(cs), median(ws), median(pc), median(pw)
	b.ReportMetric(ms(mc), "cold-ms")
	b.ReportMetric(ms(mpc), "clone-cold-ms")
	b.ReportMetric(float64(mc)/float64(mpc), "cold-ratio")
	b.ReportMetric(ms(mw), "warm-ms")
	b.ReportMetric(ms(mpw), "clone-warm-ms")
	b.ReportMetric(float64(mw)/float64(mpw), "warm-ratio")
	b.ReportMetric(ms(median(fc)), "fetch-cold-ms")
	b.ReportMetric(ms(median(fw)), "fetch-warm-ms")
	b.ReportMetric(ms(median(ss)), "candidate-ms")
	b.ReportMetric(ms(median(dc)), "cold-extra-ms")
	b.ReportMetric(ms(median(dw)), "warm-extra-ms")
}

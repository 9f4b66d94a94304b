package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// maintainedWorld is a bundle world whose candidate refs live a day and
// whose repository is repacked past one pack.
func maintainedWorld(t *testing.T, files map[string][]byte) *bundleWorld {
	return newBundleWorldWith(t, func(g *Gate) {
		g.cfg.CandidateRefTTL = policy.Duration(24 * time.Hour)
		g.cfg.RepackPacks = 1
	}, files)
}

// has reports whether the prepared repository holds object sha.
func (b *bundleWorld) has(sha string) bool {
	return exec.Command("git", "--git-dir", b.prepared, "cat-file", "-e", sha).Run() == nil
}

// refExists reports whether the prepared repository has ref.
func (b *bundleWorld) refExists(ref string) bool {
	return runGit(b.t, b.prepared, "for-each-ref", ref) != ""
}

// packs counts the prepared repository's packs.
func (b *bundleWorld) packs() int {
	p, _ := filepath.Glob(filepath.Join(b.prepared, "objects", "pack", "pack-*.pack"))
	return len(p)
}

// secondPack adds a reachable commit (on a side branch) in a pack of its
// own.
func (b *bundleWorld) secondPack() {
	b.t.Helper()
	b.n++
	c := gitEnv(b.t, b.prepared, nil, "commit-tree", runGit(b.t, b.prepared, "rev-parse", b.base+"^{tree}"), "-p", b.base, "-m", "side "+strconv.Itoa(b.n))
	runGit(b.t, b.prepared, "update-ref", "refs/heads/side"+strconv.Itoa(b.n), c)
	runGit(b.t, b.prepared, "repack", "-q")
}

// storeCandidate stores a candidate of the world's lease with a file of
// its own and returns it.
func (b *bundleWorld) storeCandidate() string {
	b.t.Helper()
	cand, tree := b.commit(b.base, map[string][]byte{"own.txt": []byte("only this candidate\n")})
	ref := wire.CandidateRef(b.lease.JobID, b.lease.AttemptID)
	if code, body := b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: b.binding(), Candidate: cand, Tree: tree}, b.bundle(ref, cand, b.base)); code != http.StatusNoContent {
		b.t.Fatalf("candidate: %d %s", code, body)
	}
	return cand
}

// A finished job's candidate ref expires candidate_ref_ttl after the job
// finished, not before, and the next repack drops what only it held; a
// ref whose commit an open job builds on (a follow-up's base) stays, and
// so does a ref of a job the store does not know.
func TestCandidateRefsExpire(t *testing.T) {
	b := maintainedWorld(t, nil)
	cand := b.storeCandidate()
	ref := wire.CandidateRef(b.lease.JobID, b.lease.AttemptID)
	blobOf := runGit(t, b.clone, "rev-parse", cand+":own.txt")
	unknown := wire.CandidateRef(strings.Repeat("a", 32), strings.Repeat("b", 32))
	runGit(t, b.prepared, "update-ref", unknown, b.base)
	ctx := context.Background()
	b.tg.g.maintainRepositories(ctx)
	if !b.refExists(ref) {
		t.Fatal("the candidate ref of a running job expired")
	}
	wantAck(t, b.w.failResult(b.lease, wire.FailureInvalidTask))
	b.tg.clock.Advance(24*time.Hour - 10*time.Second)
	b.tg.g.maintainRepositories(ctx)
	if !b.refExists(ref) {
		t.Fatal("the candidate ref expired before candidate_ref_ttl")
	}

	// A follow-up's base: an open job on the candidate (pushed upstream
	// so that today's submit takes it) keeps the ref past its time.
	runGit(t, b.clone, "push", "-q", b.upstream, cand+":refs/heads/main")
	b.tg.submit(`{"repository_id":"agent-forge","base_sha":"` + cand + `","instruction":"Follow up."}`)
	follow := b.w.lease()
	b.tg.clock.Advance(20 * time.Second) // within the follow-up's lease
	b.tg.g.maintainRepositories(ctx)
	if !b.refExists(ref) || !b.refExists("refs/agent-forge/bases/"+cand) {
		t.Fatalf("an open job's base lost its ref or pin:\n%s", runGit(t, b.prepared, "for-each-ref"))
	}
	wantAck(t, b.w.failResult(follow, wire.FailureInvalidTask))
	// Upstream goes back: only the candidate ref held the candidate.
	runGit(t, b.clone, "push", "-q", "--force", b.upstream, b.base+":refs/heads/main")
	runGit(t, b.prepared, "fetch", "-q", b.upstream, "+refs/heads/main:refs/heads/main")
	b.secondPack()
	b.tg.g.maintainRepositories(ctx)
	if b.refExists(ref) || b.refExists("refs/agent-forge/bases/"+cand) {
		t.Fatalf("an expired candidate ref or a finished job's pin stays:\n%s", runGit(t, b.prepared, "for-each-ref"))
	}
	if !b.refExists(unknown) {
		t.Fatal("the ref of a job the store does not know was deleted")
	}
	if b.has(cand) || b.has(blobOf) {
		t.Fatal("the repack kept what only an expired ref held")
	}
	if !b.has(b.base) || b.packs() != 1 {
		t.Fatalf("after the repack: base held %v, %d packs", b.has(b.base), b.packs())
	}
	if loose := runGit(t, b.prepared, "count-objects"); !strings.HasPrefix(loose, "0 objects") {
		t.Fatalf("loose objects after the repack: %s", loose)
	}
	runGit(t, b.prepared, "fsck", "--strict", "--no-dangling")
}

// A repack keeps an open job's base that no branch reaches any more (the
// default branch force-pushed upstream) and a pack under a .keep file (a
// candidate moved in whose ref is not written yet).
func TestRepackKeepsPinnedAndKept(t *testing.T) {
	b := maintainedWorld(t, nil)
	ctx := context.Background()
	runGit(t, b.clone, "push", "-q", "--force", b.upstream, b.first+":refs/heads/main")
	runGit(t, b.prepared, "fetch", "-q", b.upstream, "+refs/heads/main:refs/heads/main")
	// An unreachable blob in a pack of its own, kept.
	kept := blob(t, b.prepared, "in flight\n")
	name := runGitIn(t, b.prepared, kept+"\n", "pack-objects", "-q", filepath.Join(b.prepared, "objects", "pack", "pack"))
	keep := filepath.Join(b.prepared, "objects", "pack", "pack-"+name+".keep")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b.secondPack()
	b.tg.g.maintainRepositories(ctx)
	if !b.has(b.base) || !b.has(kept) {
		t.Fatalf("the repack dropped the open job's base (%v) or a kept pack's object (%v)", b.has(b.base), b.has(kept))
	}
	if err := os.Remove(keep); err != nil {
		t.Fatal(err)
	}
	b.tg.g.maintainRepositories(ctx)
	if b.has(kept) {
		t.Fatal("an unreachable object no longer kept survived the repack")
	}
	if code, _ := b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base}); code != http.StatusOK {
		t.Fatalf("the open job's base after the repack: %d", code)
	}
}

// Base bundles are served, whole, while the repository is repacked again
// and again under them: a repack moves its new pack in before it deletes
// the old ones.
func TestBaseReadsDuringRepack(t *testing.T) {
	files := map[string][]byte{}
	for i := range 300 {
		files["f"+strconv.Itoa(i)+".txt"] = []byte(strings.Repeat("line "+strconv.Itoa(i)+"\n", 50))
	}
	b := maintainedWorld(t, files)
	ctx := context.Background()
	req := wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	reads, failures := 0, []string{}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := get(b.tg.addr, wire.SourcePath+"?"+req.Query())
				if err == nil {
					var h gitx.BundleHeader
					if h, err = gitx.ParseBundleHeader(body); err == nil && (code != http.StatusOK || len(h.Refs) != 1) {
						err = errors.New(strconv.Itoa(code) + " " + string(body[:min(len(body), 200)]))
					}
				}
				mu.Lock()
				reads++
				if err != nil {
					failures = append(failures, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	repacks := 0
	for i := range 6 {
		// Each round adds reachable objects in a new pack, so the
		// repack writes a pack of a new name and deletes the old ones.
		_ = i
		b.secondPack()
		if b.packs() > 1 {
			repacks++
		}
		b.tg.g.maintainRepositories(ctx)
		if n := b.packs(); n != 1 {
			t.Fatalf("round %d: %d packs after maintenance", i, n)
		}
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 || reads == 0 || repacks < 5 {
		t.Fatalf("%d reads during %d repacks, failures: %q", reads, repacks, failures)
	}
	runGit(t, b.prepared, "fsck", "--strict")
}

// get is a base read with the Worker token, for goroutines.
func get(addr, path string) (int, []byte, error) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testWorkerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// A submit whose base check passed before a maintenance round and whose
// job is stored after it: the round neither pinned its base (the job was
// not open yet) nor kept it (the default branch left it, force-pushed
// upstream), and the repack dropped it. The submit checks again after
// such a round, so the job is refused instead of stored on a base gone.
// The Gate's git pauses the submit right after its base check.
func TestSubmitDuringMaintenance(t *testing.T) {
	files := map[string][]byte{}
	for i := range 120 { // past fetch.unpackLimit: the fetch keeps a pack
		files["s"+strconv.Itoa(i)+".txt"] = []byte("file " + strconv.Itoa(i) + "\n")
	}
	b := maintainedWorld(t, nil)
	s, _ := b.commit(b.base, files)
	runGit(t, b.clone, "push", "-q", b.upstream, s+":refs/heads/main")

	dir := t.TempDir()
	checked, block := filepath.Join(dir, "checked"), filepath.Join(dir, "block")
	git := b.tg.cfg.GitExecutable
	if err := os.Rename(git, git+".inner"); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncase \" $* \" in *\" merge-base --is-ancestor " + s + " \"*)\n" +
		"  '" + git + ".inner' \"$@\"; rc=$?; : >'" + checked + "'; while [ -e '" + block + "' ]; do sleep 0.02; done; exit $rc;;\nesac\n" +
		"exec '" + git + ".inner' \"$@\"\n"
	if err := os.WriteFile(git, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(block, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body []byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+b.tg.addr+"/v1/jobs",
			strings.NewReader(`{"repository_id":"agent-forge","base_sha":"`+s+`","instruction":"Fix it."}`))
		req.Header.Set("Authorization", "Bearer "+testOwnerToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, body, err}
	}()
	waitFor(t, "the submit never checked its base", func() bool { _, err := os.Stat(checked); return err == nil })
	jobs := b.tg.jobCount()

	// Upstream force-pushed back; the branch leaves s; a round runs.
	runGit(t, b.clone, "push", "-q", "--force", b.upstream, b.base+":refs/heads/main")
	runGit(t, b.prepared, "fetch", "-q", b.upstream, "+refs/heads/main:refs/heads/main")
	b.tg.g.maintainRepositories(context.Background())
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.code == http.StatusCreated {
		t.Fatalf("a job was stored on a base the round did not pin (held now: %v): %s", b.has(s), a.body)
	}
	var e errorBody
	if a.code != http.StatusUnprocessableEntity || json.Unmarshal(a.body, &e) != nil || e.Error.Code != codeSourceFailed {
		t.Fatalf("the submit after the round: %d %s", a.code, a.body)
	}
	if n := b.tg.jobCount(); n != jobs {
		t.Fatalf("%d jobs, was %d", n, jobs)
	}
}

// Expiry goes on past a candidate-ref listing of 64 MiB (350,000 refs of
// jobs with ids of the longest, 70 MB): the listing is read a page at a
// time from a file, where it once hit git_output_bytes' 64 MiB and
// failed every round, so nothing expired any more.
func TestCandidateRefsExpirePastLargeListing(t *testing.T) {
	b := maintainedWorld(t, nil)
	ref := wire.CandidateRef(b.lease.JobID, b.lease.AttemptID)
	b.storeCandidate()
	wantAck(t, b.w.failResult(b.lease, wire.FailureInvalidTask))
	packed := filepath.Join(b.prepared, "packed-refs")
	old, err := os.ReadFile(packed)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lines := []string{}
	for _, l := range strings.Split(string(old), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "^") {
			lines = append(lines, l)
		}
	}
	size := 0
	for i := range 350_000 {
		id := fmt.Sprintf("%064d", i)
		l := b.base + " " + wire.CandidateRef(id, id)
		size += len(l) + 1
		lines = append(lines, l)
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][41:] < lines[j][41:] })
	if err := os.WriteFile(packed, []byte("# pack-refs with: peeled fully-peeled sorted \n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if size <= 64<<20 {
		t.Fatalf("the listing is %d bytes", size)
	}
	b.tg.clock.Advance(24*time.Hour + time.Minute)
	b.tg.g.maintainRepositories(context.Background())
	if b.refExists(ref) {
		t.Fatal("the finished job's candidate ref did not expire")
	}
	if n := strings.Count(runGit(t, b.prepared, "for-each-ref", "--format=x", "refs/agent-forge/candidates/"), "x"); n != 350_000 {
		t.Fatalf("%d refs of unknown jobs left, want 350000", n)
	}
}

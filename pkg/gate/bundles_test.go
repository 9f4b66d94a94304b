package gate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

const testWorker2Token = "worker-two-token-0001"

// bundleWorld is a public-source Gate with one attempt leased to
// worker-1, and a Worker-side clone of upstream to make bundles in.
type bundleWorld struct {
	t        *testing.T
	tg       *testGate
	w        *rawWorker
	lease    *wire.Lease
	first    string // upstream's first commit
	base     string // the lease's base: upstream's second commit
	prepared string
	clone    string
	upstream string // upstream's bare repository
	n        int
}

func newBundleWorld(t *testing.T) *bundleWorld {
	t.Helper()
	return newBundleWorldWith(t, nil, nil)
}

// newBundleWorldWith is newBundleWorld with setup applied to the Gate
// before it serves and files added to the base commit (nil: none).
func newBundleWorldWith(t *testing.T, setup func(*Gate), files map[string][]byte) *bundleWorld {
	t.Helper()
	tg, work, first := publicGateSetup(t, false, setup, func(m map[string]any) {
		m["workers"] = append(m["workers"].([]any), map[string]any{"id": "worker-2", "pool": "coding", "token_env": "W2", "concurrency": 1})
		m["candidate_bundle_bytes"] = 4096
	})
	os.WriteFile(filepath.Join(work, "README"), []byte("readme\n"), 0o644)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, work, "add", "-A")
	runGit(t, work, "commit", "-q", "-m", "second")
	base := runGit(t, work, "rev-parse", "HEAD")
	runGit(t, work, "push", "-q", filepath.Join(filepath.Dir(work), "up", "octo-org", "hello.git"), "main")
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	tg.submit(`{"repository_id":"agent-forge","base_sha":"` + base + `","instruction":"Fix it."}`)
	l := w.lease()
	clone := filepath.Join(t.TempDir(), "clone")
	runGit(t, filepath.Dir(clone), "clone", "-q", work, clone)
	return &bundleWorld{t: t, tg: tg, w: w, lease: l, first: first, base: base, clone: clone,
		upstream: filepath.Join(filepath.Dir(work), "up", "octo-org", "hello.git"),
		prepared: filepath.Join(tg.cfg.PublicRepositoryRoot, source.DirName(testPublicURL))}
}

func (b *bundleWorld) binding() wire.AttemptBinding {
	return wire.AttemptBinding{Lane: b.w.welcome.Lane, Generation: b.w.welcome.Generation, JobID: b.lease.JobID, AttemptID: b.lease.AttemptID}
}

func (b *bundleWorld) do(method, path, token, ctype string, body []byte) (int, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, "http://"+b.tg.addr+path, bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

func (b *bundleWorld) fetch(token string, req wire.SourceRequest) (int, []byte) {
	return b.do("GET", wire.SourcePath+"?"+req.Query(), token, "", nil)
}

func (b *bundleWorld) put(token string, req wire.CandidateRequest, bundle []byte) (int, []byte) {
	return b.do("PUT", wire.CandidatePath+"?"+req.Query(), token, wire.BundleContentType, bundle)
}

// commit makes a commit in the clone on parent (with the Forge identity
// unless env overrides it), writing files, and returns it and its tree.
func (b *bundleWorld) commit(parent string, files map[string][]byte, env ...string) (string, string) {
	b.t.Helper()
	runGit(b.t, b.clone, "checkout", "-q", "--detach", parent)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(b.clone, name), data, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	runGit(b.t, b.clone, "add", "-A")
	tree := runGit(b.t, b.clone, "write-tree")
	b.n++
	args := []string{"commit-tree", tree, "-p", parent, "-m", "candidate " + strconv.Itoa(b.n)}
	sha := gitEnv(b.t, b.clone, append([]string{"GIT_AUTHOR_NAME=" + wire.CommitterName, "GIT_AUTHOR_EMAIL=" + wire.CommitterEmail,
		"GIT_COMMITTER_NAME=" + wire.CommitterName, "GIT_COMMITTER_EMAIL=" + wire.CommitterEmail,
		"GIT_AUTHOR_DATE=1700000000 +0000", "GIT_COMMITTER_DATE=1700000000 +0000"}, env...), args...)
	runGit(b.t, b.clone, "checkout", "-q", "--detach", sha)
	return sha, tree
}

// bundle writes ref at tip minus the excluded commits and returns its bytes.
func (b *bundleWorld) bundle(ref, tip string, exclude ...string) []byte {
	b.t.Helper()
	runGit(b.t, b.clone, "update-ref", ref, tip)
	file := filepath.Join(b.t.TempDir(), "c.bundle")
	args := []string{"bundle", "create", "-q", file, ref}
	for _, e := range exclude {
		args = append(args, "^"+e)
	}
	runGit(b.t, b.clone, args...)
	data, err := os.ReadFile(file)
	if err != nil {
		b.t.Fatal(err)
	}
	return data
}

// stored lists the prepared repository's candidate refs, its packs and
// loose objects and every object it holds.
func (b *bundleWorld) stored() (string, string) {
	refs := runGit(b.t, b.prepared, "for-each-ref", "refs/agent-forge/candidates/")
	return refs, runGit(b.t, b.prepared, "count-objects", "-v") + "\n" +
		runGit(b.t, b.prepared, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
}

// objects lists every object of the prepared repository.
func (b *bundleWorld) objects() []string {
	return strings.Fields(runGit(b.t, b.prepared, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))
}

// rawBundle writes a bundle by hand, as a hostile Worker could: the base
// as the one prerequisite, ref at tip, and a thin pack of the objects
// revs name (git pack-objects --revs: commits, ^exclusions, any object).
func (b *bundleWorld) rawBundle(ref, tip string, revs ...string) []byte {
	b.t.Helper()
	cmd := execGit(b.clone, "pack-objects", "-q", "--stdout", "--thin", "--delta-base-offset", "--revs")
	cmd.Stdin = strings.NewReader(strings.Join(revs, "\n") + "\n")
	pack, err := cmd.Output()
	if err != nil {
		b.t.Fatal(err)
	}
	return append(b.header(ref, tip), pack...)
}

// header is a candidate bundle's header: the base, ref at tip.
func (b *bundleWorld) header(ref, tip string) []byte {
	return gitx.FormatBundleHeader(gitx.BundleHeader{Prerequisites: []gitx.BundlePrerequisite{{SHA: b.base}},
		Refs: []gitx.BundleRef{{SHA: tip, Name: ref}}})
}

// treeCommit makes a candidate commit on the base whose tree is what
// mktree makes of entries (in the clone), and returns it and its tree.
func (b *bundleWorld) treeCommit(entries string) (string, string) {
	b.t.Helper()
	cmd := execGit(b.clone, "mktree")
	cmd.Stdin = strings.NewReader(entries)
	out, err := cmd.Output()
	if err != nil {
		b.t.Fatal(err)
	}
	tree := strings.TrimSpace(string(out))
	b.n++
	sha := gitEnv(b.t, b.clone, []string{"GIT_AUTHOR_NAME=" + wire.CommitterName, "GIT_AUTHOR_EMAIL=" + wire.CommitterEmail,
		"GIT_COMMITTER_NAME=" + wire.CommitterName, "GIT_COMMITTER_EMAIL=" + wire.CommitterEmail,
		"GIT_AUTHOR_DATE=1700000000 +0000", "GIT_COMMITTER_DATE=1700000000 +0000"},
		"commit-tree", tree, "-p", b.base, "-m", "candidate "+strconv.Itoa(b.n))
	return sha, tree
}

// blob writes data as a blob into dir's repository and returns its id.
func blob(t *testing.T, dir string, data string) string {
	t.Helper()
	cmd := execGit(dir, "hash-object", "-w", "--stdin")
	cmd.Stdin = strings.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func gitEnv(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := execGit(dir, args...)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func wantRefused(t *testing.T, name string, code int, body []byte, status int, errCode, reason string) {
	t.Helper()
	var e errorBody
	if code != status || json.Unmarshal(body, &e) != nil || e.Error.Code != errCode || (reason != "" && e.Error.Reason != reason) {
		t.Fatalf("%s: %d %s, want %d %s %s", name, code, body, status, errCode, reason)
	}
	if strings.Contains(string(body), "/") {
		t.Fatalf("%s: the answer names a path: %s", name, body)
	}
}

// The base comes down as a bundle holding exactly the base's history
// minus the haves; a candidate bundle is verified and stored under the
// attempt's candidate ref, and a second upload of it is accepted.
func TestBundleBaseAndCandidate(t *testing.T) {
	b := newBundleWorld(t)
	code, body := b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base})
	if code != http.StatusOK {
		t.Fatalf("base: %d %s", code, body)
	}
	h, err := gitx.ParseBundleHeader(body)
	if err != nil || len(h.Refs) != 1 || h.Refs[0] != (gitx.BundleRef{SHA: b.base, Name: source.BaseRef}) || len(h.Prerequisites) != 0 {
		t.Fatalf("base bundle header %+v %v", h, err)
	}
	code, body = b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base, Haves: []string{b.first, strings.Repeat("e", 40)}})
	if h, err := gitx.ParseBundleHeader(body); code != http.StatusOK || err != nil || len(h.Prerequisites) != 1 || h.Prerequisites[0].SHA != b.first {
		t.Fatalf("incremental base: %d %+v %v", code, h, err)
	}
	objects0 := b.objects()
	cand, tree := b.commit(b.base, map[string][]byte{"new.txt": []byte("new\n")})
	ref := wire.CandidateRef(b.lease.JobID, b.lease.AttemptID)
	bundle := b.bundle(ref, cand, b.base)
	req := wire.CandidateRequest{AttemptBinding: b.binding(), Candidate: cand, Tree: tree}
	if code, body := b.put(testWorkerToken, req, bundle); code != http.StatusNoContent {
		t.Fatalf("candidate: %d %s", code, body)
	}
	if got := runGit(t, b.prepared, "rev-parse", ref); got != cand {
		t.Fatalf("stored candidate %s, want %s", got, cand)
	}
	// Exactly the candidate's objects beyond the base were added.
	_, after := b.stored()
	if added, want := len(b.objects())-len(objects0), len(strings.Fields(runGit(t, b.clone, "rev-list", "--objects", "--no-object-names", cand, "--not", b.base))); added != want {
		t.Fatalf("stored %d objects, want %d", added, want)
	}
	if code, body := b.put(testWorkerToken, req, bundle); code != http.StatusNoContent {
		t.Fatalf("repeated candidate: %d %s", code, body)
	}
	if _, now := b.stored(); now != after {
		t.Fatalf("a repeated upload stored objects:\n%s\n->\n%s", after, now)
	}
	ents, _ := filepath.Glob(filepath.Join(b.tg.cfg.PublicRepositoryRoot, ".forge-scratch-*"))
	if len(ents) != 0 {
		t.Fatalf("scratch repositories left: %v", ents)
	}
	if keeps, _ := filepath.Glob(filepath.Join(b.prepared, "objects", "pack", "*.keep")); len(keeps) != 0 {
		t.Fatalf("pack keep files left: %v", keeps)
	}
}

// Hostile requests are refused and store nothing.
func TestBundleRefusals(t *testing.T) {
	b := newBundleWorld(t)
	// An object only another job's candidate holds in the prepared
	// repository (and the Worker knows).
	foreign := blob(t, b.prepared, "another job's candidate\n")
	blob(t, b.clone, "another job's candidate\n")
	refs0, objects0 := b.stored()
	bind := b.binding()
	ref := wire.CandidateRef(b.lease.JobID, b.lease.AttemptID)
	good, goodTree := b.commit(b.base, map[string][]byte{"new.txt": []byte("new\n")})
	goodBundle := b.bundle(ref, good, b.base)
	goodReq := wire.CandidateRequest{AttemptBinding: bind, Candidate: good, Tree: goodTree}

	// Fetches.
	code, body := b.fetch(testWorker2Token, wire.SourceRequest{AttemptBinding: bind, Want: b.base})
	wantRefused(t, "another worker's token", code, body, http.StatusForbidden, "forbidden", "")
	other := bind
	other.Generation = strings.Repeat("0", 32)
	code, body = b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: other, Want: b.base})
	wantRefused(t, "another generation", code, body, http.StatusForbidden, "forbidden", "")
	code, body = b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: bind, Want: good})
	wantRefused(t, "want outside the base's history", code, body, http.StatusForbidden, "forbidden", "")
	code, body = b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: bind, Want: b.first})
	wantRefused(t, "want of an ancestor, not the base", code, body, http.StatusForbidden, "forbidden", "")
	code, body = b.do("GET", wire.SourcePath+"?"+strings.Replace(wire.SourceRequest{AttemptBinding: bind, Want: b.base}.Query(), "want=", "want=x&x=", 1), testWorkerToken, "", nil)
	wantRefused(t, "malformed query", code, body, http.StatusForbidden, "forbidden", "")
	if code, _ := b.fetch(testOwnerToken, wire.SourceRequest{AttemptBinding: bind, Want: b.base}); code != http.StatusUnauthorized {
		t.Fatalf("owner token: %d", code)
	}

	// Candidates.
	twoA, _ := b.commit(b.base, map[string][]byte{"a.txt": []byte("a\n")})
	twoB, twoBTree := b.commit(twoA, map[string][]byte{"b.txt": []byte("b\n")})
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: twoB, Tree: twoBTree}, b.bundle(ref, twoB, b.base))
	wantRefused(t, "extra commits", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleCommits)
	off, offTree := b.commit(b.first, map[string][]byte{"off.txt": []byte("off\n")})
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: off, Tree: offTree}, b.bundle(ref, off, b.first))
	wantRefused(t, "different parent", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundlePrerequisites)
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: good, Tree: b.base}, goodBundle)
	wantRefused(t, "tree not as reported", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleTree)
	alien, alienTree := b.commit(b.base, map[string][]byte{"alien.txt": []byte("x\n")}, "GIT_COMMITTER_NAME=Mallory", "GIT_COMMITTER_EMAIL=m@example.invalid")
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: alien, Tree: alienTree}, b.bundle(ref, alien, b.base))
	wantRefused(t, "committer not allowed", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleIdentity)
	code, body = b.put(testWorkerToken, goodReq, b.bundle("refs/agent-forge/candidates/other/attempt", good, b.base))
	wantRefused(t, "another attempt's ref", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleRef)
	code, body = b.put(testWorkerToken, goodReq, goodBundle[:len(goodBundle)-30])
	wantRefused(t, "truncated bundle", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleMalformed)
	noise := make([]byte, 8192)
	rand.Read(noise)
	big, bigTree := b.commit(b.base, map[string][]byte{"noise.bin": []byte(hex.EncodeToString(noise))})
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: big, Tree: bigTree}, b.bundle(ref, big, b.base))
	wantRefused(t, "oversized bundle", code, body, http.StatusRequestEntityTooLarge, "candidate_too_large", "")
	code, body = b.put(testWorker2Token, goodReq, goodBundle)
	wantRefused(t, "candidate with another worker's token", code, body, http.StatusForbidden, "forbidden", "")

	// Packs that are not exactly the candidate's objects.
	code, body = b.put(testWorkerToken, goodReq, b.rawBundle(ref, good, good, "^"+b.base, blob(t, b.clone, "extra\n")))
	wantRefused(t, "an extra object", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleObjects)
	borrow, borrowTree := b.treeCommit("100644 blob " + foreign + "\tborrowed.txt\n")
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: borrow, Tree: borrowTree},
		b.rawBundle(ref, borrow, borrow, "^"+b.base, "^"+foreign))
	wantRefused(t, "an object taken from another candidate", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleObjects)
	// Objects git's fsck refuses, on every git (index-pack --strict).
	inner := runGitIn(t, b.clone, "100644 blob "+blob(t, b.clone, "[core]\n")+"\tconfig\n", "mktree")
	dotgit, dotgitTree := b.treeCommit("040000 tree " + inner + "\t.git\n")
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: dotgit, Tree: dotgitTree}, b.bundle(ref, dotgit, b.base))
	wantRefused(t, "a .git tree entry", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleFsck)
	modules := blob(t, b.clone, "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch /tmp/owned\n")
	sub, subTree := b.treeCommit("100644 blob " + modules + "\t.gitmodules\n")
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: sub, Tree: subTree}, b.bundle(ref, sub, b.base))
	wantRefused(t, "a .gitmodules url that is an option", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleFsck)
	// Three deltas of 1 GiB each in a few hundred bytes: refused before
	// git reads them.
	bomb, err := os.ReadFile("../gitx/testdata/pack/bomb.pack")
	if err != nil {
		t.Fatal(err)
	}
	code, body = b.put(testWorkerToken, goodReq, append(b.header(ref, good), bomb...))
	wantRefused(t, "a delta bomb", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleUnpacked)
	// One delta of 1 GiB, within candidate_unpacked_bytes: index-pack
	// fails at once within candidate_git_memory_bytes.
	gig, err := os.ReadFile("../gitx/testdata/pack/delta-1g.pack")
	if err != nil {
		t.Fatal(err)
	}
	code, body = b.put(testWorkerToken, goodReq, append(b.header(ref, good), gig...))
	wantRefused(t, "a 1 GiB delta", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleMemory)
	if refs, objects := b.stored(); refs != refs0 || objects != objects0 {
		t.Fatalf("refused candidates stored something:\nrefs %q -> %q\nobjects %q -> %q", refs0, refs, objects0, objects)
	}

	// The attempt's candidate stored: exactly its objects are added. Then
	// its replay carrying an extra blob is accepted without a read, and
	// another candidate carrying one finds the ref taken: neither stores
	// anything.
	before := b.objects()
	if code, body := b.put(testWorkerToken, goodReq, goodBundle); code != http.StatusNoContent {
		t.Fatalf("the good candidate: %d %s", code, body)
	}
	if added, want := len(b.objects())-len(before), len(strings.Fields(runGit(t, b.clone, "rev-list", "--objects", "--no-object-names", good, "--not", b.base))); added != want {
		t.Fatalf("stored %d objects, want %d", added, want)
	}
	refs0, objects0 = b.stored()
	if code, body := b.put(testWorkerToken, goodReq, b.rawBundle(ref, good, good, "^"+b.base, blob(t, b.clone, "extra on a replay\n"))); code != http.StatusNoContent {
		t.Fatalf("a replay of the stored candidate with an extra blob: %d %s", code, body)
	}
	taken, takenTree := b.commit(b.base, map[string][]byte{"other.txt": []byte("other\n")})
	code, body = b.put(testWorkerToken, wire.CandidateRequest{AttemptBinding: bind, Candidate: taken, Tree: takenTree},
		b.rawBundle(ref, taken, taken, "^"+b.base, blob(t, b.clone, "extra object\n")))
	wantRefused(t, "another candidate for a taken ref", code, body, http.StatusUnprocessableEntity, "candidate_refused", source.ReasonBundleRefTaken)

	// The lease expires: the attempt's bundle, replayed, stores nothing.
	b.tg.clock.Advance(time.Hour)
	code, body = b.put(testWorkerToken, goodReq, goodBundle)
	wantRefused(t, "replayed bundle for an expired attempt", code, body, http.StatusForbidden, "forbidden", "")
	code, body = b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: bind, Want: b.base})
	wantRefused(t, "fetch for an expired attempt", code, body, http.StatusForbidden, "forbidden", "")

	if refs, objects := b.stored(); refs != refs0 || objects != objects0 {
		t.Fatalf("refused requests stored something:\nrefs %q -> %q\nobjects %q -> %q", refs0, refs, objects0, objects)
	}
}

// A finished lease serves nothing: after the attempt's result, its
// binding is refused.
func TestBundleFinishedLease(t *testing.T) {
	b := newBundleWorld(t)
	r := b.w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: b.lease.JobID, AttemptID: b.lease.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: wire.DispositionTerminal, FailureCode: wire.FailureInvalidTask}})
	if r.Type != wire.TypeAck {
		t.Fatalf("result: %+v", r)
	}
	code, body := b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base})
	wantRefused(t, "fetch for a finished lease", code, body, http.StatusForbidden, "forbidden", "")
}

// A success result claims a public-source candidate only once the Gate
// stored it from the attempt's bundle.
func TestResultNeedsStoredCandidate(t *testing.T) {
	b := newBundleWorld(t)
	cand, tree := b.commit(b.base, map[string][]byte{"new.txt": []byte("new\n")})
	rec := json.RawMessage(`{"phase":"candidate_commit","reason":"created","sha":"` + cand + `"}`)
	ev := b.w.request(wire.Envelope{Type: wire.TypeEvidence, Evidence: &wire.Evidence{JobID: b.lease.JobID, AttemptID: b.lease.AttemptID, Batch: 1, Records: []json.RawMessage{rec}}})
	if ev.Type != wire.TypeAck {
		t.Fatalf("evidence: %+v", ev)
	}
	result := wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: b.lease.JobID, AttemptID: b.lease.AttemptID,
		Outcome: wire.OutcomeSucceeded, CandidateSHA: cand}}
	if r := b.w.request(result); r.Type != wire.TypeReject || r.Reject.Code != wire.RejectInvalid {
		t.Fatalf("result without a stored candidate: %+v", r)
	}
	_ = tree
}

// runGitIn is runGit with stdin.
func runGitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := execGit(dir, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// execGit is runGit's command, for callers that add environment.
func execGit(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid")
	return cmd
}

// A have that is not an ancestor of the lease's base is ignored, so the
// answer never depends on objects outside the lease: an unknown commit,
// another job's candidate (a commit only the Gate holds) and a foreign
// fork each get exactly the answer of no have at all.
func TestBundleHavesOutsideTheBase(t *testing.T) {
	b := newBundleWorld(t)
	answer := func(haves ...string) string {
		code, body := b.fetch(testWorkerToken, wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base, Haves: haves})
		h, err := gitx.ParseBundleHeader(body)
		if code != http.StatusOK || err != nil || len(body) < h.Size+12 {
			return strconv.Itoa(code) + " " + string(body)
		}
		return fmt.Sprintf("%+v objects %x", h.Prerequisites, body[h.Size+8:h.Size+12])
	}
	none := answer()
	tree := runGit(t, b.prepared, "rev-parse", b.base+"^{tree}")
	candidate := gitEnv(t, b.prepared, nil, "commit-tree", tree, "-p", b.base, "-m", "another job's candidate")
	fork := gitEnv(t, b.prepared, nil, "commit-tree", tree, "-p", b.first, "-m", "a foreign fork")
	for name, have := range map[string]string{"unknown": strings.Repeat("e", 40), "candidate": candidate, "fork": fork} {
		if got := answer(have); got != none {
			t.Errorf("have of %s: %s, want %s", name, got, none)
		}
	}
	if got := answer(b.first); got == none {
		t.Fatalf("an ancestor of the base is not subtracted: %s", got)
	}
}

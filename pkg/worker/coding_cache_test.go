package worker

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// The Worker takes a base bundle only with exactly one ref, the base
// under refs/forge/base (prerequisites are fetch's to verify:
// TestWarmFetchOfAMergeOfAnOlderFork).
func TestCheckBaseBundle(t *testing.T) {
	base, have, other := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	pack := append([]byte("PACK\x00\x00\x00\x02"), binary.BigEndian.AppendUint32(nil, 7)...)
	write := func(header string) string {
		p := filepath.Join(t.TempDir(), "b.bundle")
		if err := os.WriteFile(p, append([]byte(header), pack...), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n, _, err := checkBaseBundle(write("# v2 git bundle\n-"+have+" old\n"+base+" refs/forge/base\n\n"), base); err != nil || n != 7 {
		t.Fatalf("good bundle: %d objects, %v", n, err)
	}
	for name, header := range map[string]string{
		"another ref name": "# v2 git bundle\n" + base + " refs/heads/main\n\n",
		"another commit":   "# v2 git bundle\n" + other + " refs/forge/base\n\n",
		"two refs":         "# v2 git bundle\n" + base + " refs/forge/base\n" + other + " refs/forge/other\n\n",
		"not a bundle":     "PACK",
	} {
		if _, _, err := checkBaseBundle(write(header), base); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	short := filepath.Join(t.TempDir(), "short.bundle")
	os.WriteFile(short, []byte("# v2 git bundle\n"+base+" refs/forge/base\n\nPACK\x00\x00\x00\x02\x00"), 0o600)
	if _, _, err := checkBaseBundle(short, base); err == nil {
		t.Error("a pack header cut short: accepted")
	}
}

// cacheWorld is one Worker's source cache fed by the Gate's own bundle
// code (source.Preparer.BaseBundle) over a GateLink, as in production,
// from the bare repository src (commits written with fast-import).
type cacheWorld struct {
	t     *testing.T
	root  string
	src   string
	git   string
	x     *CodingExecutor
	cfg   *Config
	cache string
	url   *url.URL
	srv   *httptest.Server
	// lie, when set, is a have the Gate subtracts although the Worker
	// never named it.
	lie  string
	logs bytes.Buffer // the executor's log (JSON lines)
}

func newCacheWorld(t *testing.T) *cacheWorld {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"gate", "wt", "rt"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w := &cacheWorld{t: t, root: root, src: filepath.Join(root, "src.git")}
	gitT(t, root, "init", "-q", "--bare", "-b", "main", w.src)
	if w.git, err = exec.LookPath("git"); err != nil {
		t.Fatal(err)
	}
	w.git, _ = filepath.EvalSymlinks(w.git)
	prep, err := source.New(filepath.Join(root, "gate"), w.git, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		req, err := wire.ParseSourceRequest(r.URL.RawQuery)
		if err != nil || r.URL.Path != wire.SourcePath {
			http.Error(rw, "bad request", http.StatusBadRequest)
			return
		}
		haves := req.Haves
		if w.lie != "" {
			haves = append(haves, w.lie)
		}
		file, done, err := prep.BaseBundle(r.Context(), source.Repository{Timeout: time.Minute, OutputBytes: 1 << 20}, w.src, req.Want, haves)
		var be *source.BundleError
		if errors.As(err, &be) && be.Reason == source.ReasonNothingToSend {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusConflict)
			rw.Write([]byte(`{"error":{"code":"nothing_to_send"}}`))
			return
		}
		if err != nil {
			http.Error(rw, "no bundle", http.StatusInternalServerError)
			return
		}
		defer done()
		rw.Header().Set("Content-Type", wire.BundleContentType)
		http.ServeFile(rw, r, file)
	}))
	t.Cleanup(w.srv.Close)
	w.url, _ = url.Parse("ws" + strings.TrimPrefix(w.srv.URL, "http"))
	w.cfg = &Config{WorktreeRoot: filepath.Join(root, "wt"), RuntimeRoot: filepath.Join(root, "rt"),
		Repositories: []Repository{{ID: "pub", Gate: true}}}
	if w.x, err = NewCodingExecutor(w.cfg, CodingOptions{Git: w.git, Logger: slog.New(slog.NewJSONHandler(&w.logs, nil))}); err != nil {
		t.Fatal(err)
	}
	w.cache = CacheDir(w.cfg.RuntimeRoot, "pub")
	return w
}

// importCommits feeds stream to fast-import in src and returns the marks.
func (w *cacheWorld) importCommits(stream []byte) map[int]string {
	w.t.Helper()
	marks := filepath.Join(w.root, "marks")
	cmd := exec.Command("git", "--git-dir="+w.src, "fast-import", "--quiet", "--export-marks="+marks)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Stdin = bytes.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("fast-import: %v %s", err, out)
	}
	m := map[int]string{}
	b, _ := os.ReadFile(marks)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, sha, _ := strings.Cut(line, " ")
		n, _ := strconv.Atoi(strings.TrimPrefix(k, ":"))
		m[n] = sha
	}
	return m
}

// fetch runs ensureBase for an attempt on base; the attempt borrows it
// until its cleanup.
func (w *cacheWorld) fetch(base string) (*codingJob, error) {
	w.t.Helper()
	j := &codingJob{x: w.x, task: wire.CodingTask{RepositoryID: "pub", BaseSHA: base},
		attempt: &Attempt{Gate: newGateLink(w.url, "token", w.srv.Client(), wire.AttemptBinding{
			Lane: "worker-1#1", Generation: strings.Repeat("a", ident.HexIDLen), JobID: "job", AttemptID: "attempt"})}}
	home, err := os.MkdirTemp(w.cfg.RuntimeRoot, "git-")
	if err != nil {
		w.t.Fatal(err)
	}
	j.gitHome = home
	j.git = &gitx.Runner{Git: w.git, Home: home, Timeout: time.Minute, OutputBytes: 1 << 20}
	_, err = j.ensureBase(context.Background())
	return j, err
}

// records returns the executor's log records with message msg.
func (w *cacheWorld) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(w.logs.String()), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// packs counts the cache's packs.
func (w *cacheWorld) packs() int {
	ents, _ := os.ReadDir(filepath.Join(w.cache, "objects", "pack"))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".pack") {
			n++
		}
	}
	return n
}

// fastCommit appends a fast-import commit adding file name (its content
// the name) on branch, with the given parents (marks) and date offset.
func fastCommit(b *bytes.Buffer, mark int, branch, name string, when int, parents ...int) {
	fmt.Fprintf(b, "commit refs/heads/%s\nmark :%d\ncommitter Seed <seed@example.invalid> %d +0000\ndata %d\n%s\n",
		branch, mark, 1700000000+when, len(name), name)
	for i, p := range parents {
		if i == 0 {
			fmt.Fprintf(b, "from :%d\n", p)
		} else {
			fmt.Fprintf(b, "merge :%d\n", p)
		}
	}
	fmt.Fprintf(b, "M 100644 inline %s.txt\ndata %d\n%s\n\n", name, len(name)+1, name+"\n")
}

// A warm fetch of a merge whose branch forked before the cached base: the
// bundle's prerequisites then include the fork point, a commit the cache
// has but never named as a have. The fetch succeeds and brings only the
// new objects (two commits, two trees, two blobs). One whose prerequisite
// the cache really lacks is refused.
func TestWarmFetchOfAMergeOfAnOlderFork(t *testing.T) {
	w := newCacheWorld(t)
	var s bytes.Buffer
	fastCommit(&s, 1, "main", "fork", 0)
	fastCommit(&s, 2, "feature", "feature", 1, 1)
	fastCommit(&s, 3, "main", "old", 2, 1)
	fastCommit(&s, 4, "main", "merge", 3, 3, 2)
	m := w.importCommits(s.Bytes())
	j, err := w.fetch(m[3])
	if err != nil {
		t.Fatal(err)
	}
	j.cleanup()
	cold := countObjects(t, w.cache)
	// A bundle whose prerequisite the cache lacks (the feature commit,
	// never fetched) is refused and stores nothing.
	w.lie = m[2]
	if j, err = w.fetch(m[4]); err == nil {
		t.Fatal("a bundle needing a commit the cache lacks was fetched")
	}
	j.cleanup()
	w.lie = ""
	if n := countObjects(t, w.cache); n != cold {
		t.Fatalf("the refused bundle left %d objects", n-cold)
	}
	if refs := gitT(t, w.cache, "for-each-ref", "--format=%(refname)"); refs != basesPrefix+m[3] {
		t.Fatalf("cache refs after the refused bundle: %q", refs)
	}
	j, err = w.fetch(m[4])
	if err != nil {
		t.Fatalf("warm fetch of the merge: %v", err)
	}
	j.cleanup()
	if n := countObjects(t, w.cache) - cold; n != 6 {
		t.Fatalf("the warm fetch brought %d objects, want 6", n)
	}
	// Each fetch logs what it received: counts and the repository id,
	// never a commit, path or URL.
	recs := w.records("base fetched")
	if len(recs) != 2 || recs[0]["objects"] != float64(cold) || recs[1]["objects"] != float64(6) || recs[1]["haves"] != float64(1) {
		t.Fatalf("fetch records %v (cold cache %d objects)", recs, cold)
	}
	for _, v := range []string{m[3], m[4], w.root, w.srv.URL} {
		if strings.Contains(w.logs.String(), v) {
			t.Fatalf("the log names a value: %s", w.logs.String())
		}
	}
}

// The source cache is maintained once a fetch leaves cacheMaintainPacks
// packs: the refs of bases neither among the newest maxCacheHaves nor
// borrowed by a running attempt go, and one repack drops what only they
// reached. An old base an attempt still borrows keeps its ref and every
// object, and that attempt's repository stays whole. 5 bases on a side
// branch (the third one borrowed throughout, with its attempt
// repository), then 41 on main, each fetched and released: the 16th,
// 31st and 46th fetches maintain the cache, the last one deleting 13
// refs.
func TestSourceCacheMaintenanceKeepsBorrowedBases(t *testing.T) {
	w := newCacheWorld(t)
	var s bytes.Buffer
	fastCommit(&s, 1, "main", "root", 0)
	var side, mainline []int
	for i, prev := 1, 1; i <= 5; i++ {
		fastCommit(&s, 1+i, "side", "s"+strconv.Itoa(i), i, prev)
		prev = 1 + i
		side = append(side, prev)
	}
	for i, prev := 1, 1; i <= 41; i++ {
		fastCommit(&s, 10+i, "main", "c"+strconv.Itoa(i), 100+i, prev)
		prev = 10 + i
		mainline = append(mainline, prev)
	}
	marks := w.importCommits(s.Bytes())
	ctx := context.Background()
	var borrower *codingJob
	for i, m := range side {
		j, err := w.fetch(marks[m])
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			borrower, j.gate = j, true // as prepareGate
			if err := j.addAttemptRepo(ctx, w.cache); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := j.cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range mainline {
		j, err := w.fetch(marks[m])
		if err != nil {
			t.Fatal(err)
		}
		if n, fetched := w.packs(), 5+i+1; n != (fetched-1)%(cacheMaintainPacks-1)+1 {
			t.Fatalf("after fetch %d: %d packs", fetched, n)
		}
		if err := j.cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.packs(); n != 1 {
		t.Fatalf("%d packs after the last maintenance", n)
	}
	if recs := w.records("source cache maintained"); len(recs) != 3 || recs[2]["refs_deleted"] != float64(13) {
		t.Fatalf("maintenance records %v", recs)
	}
	want := map[string]bool{marks[side[2]]: true}
	for _, m := range mainline[len(mainline)-maxCacheHaves:] {
		want[marks[m]] = true
	}
	got := map[string]bool{}
	for _, line := range strings.Split(gitT(t, w.cache, "for-each-ref", "--format=%(refname)", basesPrefix), "\n") {
		got[strings.TrimPrefix(line, basesPrefix)] = true
	}
	if !maps.Equal(got, want) {
		t.Fatalf("cache refs %v, want the newest %d bases and the borrowed one", got, maxCacheHaves)
	}
	// s4 and s5 were reachable from their own refs only: gone. s1..s3 and
	// c1..c9 are history of kept bases: there.
	for _, gone := range []string{marks[side[3]], marks[side[4]], marks[side[4]] + ":s5.txt"} {
		if err := exec.Command("git", "--git-dir="+w.cache, "cat-file", "-e", gone).Run(); err == nil {
			t.Errorf("%s survived maintenance", gone)
		}
	}
	gitT(t, w.cache, "cat-file", "-e", marks[mainline[0]]+":c1.txt")
	gitT(t, w.cache, "cat-file", "-e", marks[side[0]]+":s1.txt")
	// The borrowing attempt's repository is whole: every object its HEAD
	// and index name is readable through the alternates.
	d := borrower.gateDirs
	fsck := exec.Command("git", "--git-dir="+d.GitDir, "--work-tree="+d.Workspace, "fsck", "--connectivity-only", "--no-dangling")
	fsck.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := fsck.CombinedOutput(); err != nil {
		t.Fatalf("the borrowing attempt's repository is broken: %v %s", err, out)
	}
	if got := gitT(t, d.Workspace, "show", "HEAD:s3.txt"); got != "s3" {
		t.Fatalf("s3.txt = %q", got)
	}
	if err := borrower.cleanup(); err != nil {
		t.Fatal(err)
	}
	if n := len(w.x.borrowedBases("pub")); n != 0 {
		t.Fatalf("%d bases still borrowed after every cleanup", n)
	}
}

// gitIn runs git in dir with stdin and returns its output.
func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Seed", "GIT_AUTHOR_EMAIL=seed@example.invalid",
		"GIT_COMMITTER_NAME=Seed", "GIT_COMMITTER_EMAIL=seed@example.invalid")
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// Every object of a base bundle is fsck'd strictly on every git (git
// fetch of a bundle ignores transfer.fsckObjects before 2.46): a base
// whose tree has a .git entry, or a .gitmodules whose url is an option,
// is refused and leaves the cache as it was.
func TestBaseFetchFscksEveryObject(t *testing.T) {
	w := newCacheWorld(t)
	var s bytes.Buffer
	fastCommit(&s, 1, "main", "first", 0)
	m := w.importCommits(s.Bytes())
	j, err := w.fetch(m[1])
	if err != nil {
		t.Fatal(err)
	}
	j.cleanup()
	objects, refs := countObjects(t, w.cache), gitT(t, w.cache, "for-each-ref")
	config := gitIn(t, w.src, "[core]\n", "hash-object", "-w", "--stdin")
	modules := gitIn(t, w.src, "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch /tmp/owned\n", "hash-object", "-w", "--stdin")
	for name, entry := range map[string]string{
		".git":        "040000 tree " + gitIn(t, w.src, "100644 blob "+config+"\tconfig\n", "mktree") + "\t.git\n",
		".gitmodules": "100644 blob " + modules + "\t.gitmodules\n",
	} {
		c := gitIn(t, w.src, "", "commit-tree", gitIn(t, w.src, entry, "mktree"), "-p", m[1], "-m", name)
		j, err := w.fetch(c)
		if err == nil {
			t.Fatalf("%s: a base git's fsck refuses was fetched", name)
		}
		j.cleanup()
		if n, r := countObjects(t, w.cache), gitT(t, w.cache, "for-each-ref"); n != objects || r != refs {
			t.Fatalf("%s: the refused base left %d objects, refs %q", name, n-objects, r)
		}
	}
}

// Every base an attempt borrows has its own ref, set under the cache's
// lock before the attempt starts: a base that is only an ancestor of a
// cached base, or whose fetch was killed after its pack landed and before
// its ref, survives maintenance dropping every other ref.
func TestBorrowedBaseIsPinned(t *testing.T) {
	w := newCacheWorld(t)
	var s bytes.Buffer
	fastCommit(&s, 1, "main", "first", 0)
	fastCommit(&s, 2, "main", "second", 1, 1)
	m := w.importCommits(s.Bytes())
	j, err := w.fetch(m[2])
	if err != nil {
		t.Fatal(err)
	}
	j.cleanup()
	borrower, err := w.fetch(m[1]) // an ancestor of the cached base
	if err != nil {
		t.Fatal(err)
	}
	defer borrower.cleanup()
	// What maintenance does to a base outside the newest and the
	// borrowed ones: its ref goes, then a repack drops what only it
	// reached.
	gitT(t, w.cache, "update-ref", "-d", basesPrefix+m[2])
	gitT(t, w.cache, "repack", "-a", "-d", "-q")
	if got := gitT(t, w.cache, "for-each-ref", "--format=%(refname)"); got != basesPrefix+m[1] {
		t.Fatalf("refs after maintenance: %q", got)
	}
	gitT(t, w.cache, "rev-list", "--objects", "--quiet", m[1])
}

// A cache that cannot serve its bases is rebuilt instead of failing every
// attempt: one whose packs vanished under its refs (the Gate finds nothing
// to send), one holding a base's commit without its tree.
func TestBrokenCacheIsRebuilt(t *testing.T) {
	w := newCacheWorld(t)
	var s bytes.Buffer
	fastCommit(&s, 1, "main", "first", 0)
	fastCommit(&s, 2, "main", "second", 1, 1)
	m := w.importCommits(s.Bytes())
	j, err := w.fetch(m[1])
	if err != nil {
		t.Fatal(err)
	}
	j.cleanup()
	packs, _ := filepath.Glob(filepath.Join(w.cache, "objects", "pack", "pack-*"))
	for _, p := range packs {
		os.Remove(p)
	}
	if j, err = w.fetch(m[1]); err != nil {
		t.Fatalf("a cache without its packs: %v", err)
	}
	j.cleanup()
	gitT(t, w.cache, "rev-list", "--objects", "--quiet", m[1])
	// The second commit alone, without its tree.
	raw := gitT(t, w.src, "cat-file", "commit", m[2]) // fast-import wrote no final newline
	if got := gitIn(t, w.cache, raw, "hash-object", "-w", "-t", "commit", "--stdin"); got != m[2] {
		t.Fatalf("planted %s, want %s", got, m[2])
	}
	if j, err = w.fetch(m[2]); err != nil {
		t.Fatalf("a cache holding a commit without its tree: %v", err)
	}
	j.cleanup()
	gitT(t, w.cache, "rev-list", "--objects", "--quiet", m[2])
	if n := len(w.records("source cache rebuilt")); n != 2 {
		t.Fatalf("%d rebuilds logged, want 2", n)
	}
}

// SweepRuntime removes what killed fetches left in the caches: git's
// temporary packs, quarantines and half-made caches; the caches
// themselves stay.
func TestSweepRemovesKilledFetchLeftovers(t *testing.T) {
	w := newCacheWorld(t)
	var s bytes.Buffer
	fastCommit(&s, 1, "main", "first", 0)
	m := w.importCommits(s.Bytes())
	j, err := w.fetch(m[1])
	if err != nil {
		t.Fatal(err)
	}
	j.cleanup()
	root := filepath.Dir(w.cache)
	left := []string{filepath.Join(w.cache, "objects", "pack", "tmp_pack_x1"), filepath.Join(w.cache, "objects", "pack", "tmp_idx_x2"),
		filepath.Join(root, ".init-123", "objects"), filepath.Join(root, fetchPrefix+"456", "r.git")}
	for _, p := range left {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := SweepRuntime(w.cfg.RuntimeRoot); err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s stays", filepath.Base(p))
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 1 {
		t.Fatalf("sources hold %d entries, want the cache", len(ents))
	}
	gitT(t, w.cache, "rev-list", "--objects", "--quiet", m[1])
}

package source

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/githubfake"
)

const testURL = "https://github.com/octo/app.git"

// upstream is the fake github.com, a Preparer whose git reaches it, and a
// working clone that pushes to the upstream bare repository directly.
type upstream struct {
	t       *testing.T
	srv     *githubfake.Server
	bare    string // <fake root>/octo/app.git
	work    string
	root    string // the public repository root
	logPath string
	fetches string // one line per git fetch the Preparer ran
	block   string // while this file exists, the Preparer's fetches wait
	p       *Preparer
	logs    *bytes.Buffer
	logMu   sync.Mutex
}

func realDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// syncBuffer guards the buffer slog writes to from fetch goroutines.
type syncBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (s syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	sysGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	dir := realDir(t)
	u := &upstream{t: t, root: filepath.Join(dir, "public"), logPath: filepath.Join(dir, "requests.log"),
		fetches: filepath.Join(dir, "fetches"), block: filepath.Join(dir, "block"), logs: &bytes.Buffer{}}
	pki := filepath.Join(dir, "pki")
	if err := githubfake.WritePKI(pki, time.Now()); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, githubfake.CertFile), filepath.Join(pki, githubfake.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	gitRoot := filepath.Join(dir, "github")
	for _, d := range []string{u.root, gitRoot} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	reqLog, err := githubfake.OpenLog(u.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reqLog.Close() })
	u.srv = githubfake.New(gitRoot, sysGit, reqLog)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: u.srv}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	// The test's git: the real one, told to reach https://github.com/ on
	// the fake's port and to trust its CA. The Preparer cannot tell.
	wrapper := filepath.Join(dir, "git")
	script := "#!/bin/sh\n" +
		"for a in \"$@\"; do if [ \"$a\" = fetch ]; then echo fetch >>'" + u.fetches + "'; " +
		"case \"$*\" in *'" + testURL + "'*) while [ -e '" + u.block + "' ]; do sleep 0.02; done;; esac; break; fi; done\n" +
		"exec '" + sysGit + "' -c url.https://github.com:" + port + "/.insteadOf=https://github.com/ " +
		"-c http.curloptResolve=github.com:" + port + ":127.0.0.1 -c http.sslCAInfo='" + filepath.Join(pki, githubfake.CAFile) + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	u.bare = filepath.Join(gitRoot, "octo", "app.git")
	u.work = filepath.Join(dir, "work")
	hostGit(t, dir, "init", "-q", "-b", "main", u.work)
	u.commit("first")
	hostGit(t, u.work, "init", "-q", "--bare", u.bare)
	u.push("main")

	log := slog.New(slog.NewJSONHandler(syncBuffer{&u.logMu, u.logs}, nil))
	if u.p, err = New(u.root, wrapper, log, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.p.Close)
	return u
}

func hostGit(t testing.TB, dir string, args ...string) string {
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

// commit makes an empty commit in the working clone and returns its SHA.
func (u *upstream) commit(msg string) string {
	hostGit(u.t, u.work, "commit", "-q", "--allow-empty", "-m", msg)
	return hostGit(u.t, u.work, "rev-parse", "HEAD")
}

func (u *upstream) push(refspecs ...string) {
	hostGit(u.t, u.work, append([]string{"push", "-q", "--force", u.bare}, refspecs...)...)
}

func (u *upstream) repo() Repository {
	return Repository{ID: "app", URL: testURL, Branch: "main", Timeout: time.Minute, OutputBytes: 1 << 20}
}

func (u *upstream) prepare(base string) (string, error) {
	return u.p.Prepare(context.Background(), u.repo(), base)
}

// fetchCount is how many git fetches the Preparer ran.
func (u *upstream) fetchCount() int {
	b, _ := os.ReadFile(u.fetches)
	return strings.Count(string(b), "fetch\n")
}

// clones counts the Preparer's "clone" log events.
func (u *upstream) clones() int {
	u.logMu.Lock()
	defer u.logMu.Unlock()
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(u.logs.Bytes()))
	for sc.Scan() {
		var e struct{ Kind string }
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Kind == "clone" {
			n++
		}
	}
	return n
}

// rootEntries lists the public root without the Preparer's git home.
func (u *upstream) rootEntries() []string {
	ents, err := os.ReadDir(u.root)
	if err != nil {
		u.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != homeDir {
			names = append(names, e.Name())
		}
	}
	return names
}

func wantSourceError(t *testing.T, err error, phase, reason string, retryable bool) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Phase != phase || e.Reason != reason || e.Retryable != retryable {
		t.Fatalf("got %v, want %s/%s retryable=%v", err, phase, reason, retryable)
	}
	if strings.Contains(err.Error(), "/") {
		t.Fatalf("error holds a path or URL: %v", err)
	}
}

func TestPrepareClonesOnlyTheDefaultBranch(t *testing.T) {
	u := newUpstream(t)
	base := u.commit("second")
	hostGit(t, u.work, "tag", "v1")
	hostGit(t, u.work, "branch", "feature")
	u.push("main", "feature", "v1")

	dir, err := u.prepare(base)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(u.root, DirName(testURL)) {
		t.Fatalf("prepared at %s", dir)
	}
	if got := hostGit(t, dir, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Fatalf("not bare: %s", got)
	}
	if refs := hostGit(t, dir, "for-each-ref", "--format=%(refname) %(objectname)"); refs != "refs/heads/main "+base {
		t.Fatalf("refs after the clone:\n%s", refs)
	}
	if head := hostGit(t, dir, "symbolic-ref", "HEAD"); head != "refs/heads/main" {
		t.Fatalf("HEAD %s", head)
	}
	if url := hostGit(t, dir, "config", "--get", "remote.origin.url"); url != testURL {
		t.Fatalf("origin %s", url)
	}
	if _, err := os.Stat(filepath.Join(dir, "hooks")); err == nil {
		t.Fatal("the clone has a hooks directory")
	}
	if names := u.rootEntries(); len(names) != 1 || names[0] != DirName(testURL) {
		t.Fatalf("root holds %v", names)
	}
	if u.clones() != 1 || u.fetchCount() != 1 {
		t.Fatalf("clones %d fetches %d", u.clones(), u.fetchCount())
	}
}

func TestPrepareReuseFetchesNewCommits(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	if _, err := u.prepare(first); err != nil {
		t.Fatal(err)
	}
	next := u.commit("pushed later")
	u.push("main")
	dir, err := u.prepare(next)
	if err != nil {
		t.Fatalf("a commit pushed before the submit is not seen: %v", err)
	}
	if got := hostGit(t, dir, "rev-parse", "refs/heads/main"); got != next {
		t.Fatalf("main %s, want %s", got, next)
	}
	if u.clones() != 1 || u.fetchCount() != 2 {
		t.Fatalf("clones %d fetches %d", u.clones(), u.fetchCount())
	}
}

func TestPrepareHookNeverRuns(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	dir, err := u.prepare(first)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(realDir(t), "hook-ran")
	os.Mkdir(filepath.Join(dir, "hooks"), 0o700)
	for _, h := range []string{"reference-transaction", "post-fetch", "pre-auto-gc", "post-checkout", "fsmonitor-watchman"} {
		if err := os.WriteFile(filepath.Join(dir, "hooks", h), []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	next := u.commit("again")
	u.push("main")
	if _, err := u.prepare(next); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a planted hook ran")
	}
}

func TestPrepareBaseRefusals(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	ahead := u.commit("ahead")
	u.push("main")
	if _, err := u.prepare(ahead); err != nil {
		t.Fatal(err)
	}
	// Upstream rewinds main: the old tip stays in the local objects but is
	// no longer on the default branch.
	hostGit(t, u.work, "reset", "-q", "--hard", first)
	u.push("main")
	_, err := u.prepare(ahead)
	wantSourceError(t, err, PhaseBase, ReasonBaseNotOnBranch, false)

	hostGit(t, u.work, "checkout", "-q", "-b", "feature")
	side := u.commit("on a side branch")
	u.push("feature")
	_, err = u.prepare(side)
	wantSourceError(t, err, PhaseBase, ReasonBaseMissing, false)
	_, err = u.prepare(strings.Repeat("0", 40))
	wantSourceError(t, err, PhaseBase, ReasonBaseMissing, false)
}

func TestPrepareUpstreamFaults(t *testing.T) {
	for _, tc := range []struct {
		fault, reason string
		retryable     bool
	}{
		{githubfake.FaultRedirect, "redirect", false},
		{githubfake.FaultAuth, "credentials_required", false},
		{githubfake.FaultError, "server_error", true},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			u := newUpstream(t)
			first := hostGit(t, u.work, "rev-parse", "HEAD")
			if err := u.srv.SetFault("octo/app", tc.fault); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := u.prepare(first)
			wantSourceError(t, err, PhaseClone, tc.reason, tc.retryable)
			if names := u.rootEntries(); len(names) != 0 {
				t.Fatalf("a failed clone left %v", names)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatal("the failure waited for a prompt or a timeout")
			}
			// The same fault on a reused repository fails the fetch phase.
			u.srv.SetFault("octo/app", githubfake.FaultNone)
			if _, err := u.prepare(first); err != nil {
				t.Fatal(err)
			}
			u.srv.SetFault("octo/app", tc.fault)
			_, err = u.prepare(first)
			wantSourceError(t, err, PhaseFetch, tc.reason, tc.retryable)
		})
	}
}

func TestPrepareValidatesReuse(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		spoil        func(t *testing.T, dir string)
	}{
		{"origin changed", ReasonOriginMismatch, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "remote.origin.url", "https://github.com/evil/app.git")
		}},
		{"second remote", ReasonOriginMismatch, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "remote.other.url", testURL)
		}},
		{"url rewrite", ReasonUnexpectedConfig, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "url.https://evil.example/.insteadOf", "https://github.com/")
		}},
		{"include", ReasonUnexpectedConfig, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "include.path", "/dev/null")
		}},
		{"hooks path", ReasonUnexpectedConfig, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "core.hooksPath", dir)
		}},
		{"fsmonitor", ReasonUnexpectedConfig, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "core.fsmonitor", "/bin/true")
		}},
		{"http proxy", ReasonUnexpectedConfig, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "http.proxy", "http://127.0.0.1:9")
		}},
		{"http extra header", ReasonUnexpectedConfig, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "http.https://github.com/.extraHeader", "X: y")
		}},
		{"fetch refspec", ReasonOriginMismatch, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "remote.origin.fetch", "+refs/*:refs/*")
		}},
		{"push url", ReasonOriginMismatch, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "remote.origin.pushurl", "https://github.com/evil/app.git")
		}},
		{"symlinked objects", ReasonNotBare, func(t *testing.T, dir string) {
			objs := filepath.Join(filepath.Dir(dir), "elsewhere")
			os.Rename(filepath.Join(dir, "objects"), objs)
			os.Symlink(objs, filepath.Join(dir, "objects"))
		}},
		{"http alternates", ReasonUnsafeRepository, func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "objects", "info", "http-alternates"), []byte("https://evil.example/\n"), 0o600)
		}},
		{"group-writable", ReasonUnsafeRepository, func(t *testing.T, dir string) {
			os.Chmod(dir, 0o770)
		}},
		{"not bare", ReasonNotBare, func(t *testing.T, dir string) {
			hostGit(t, dir, "config", "core.bare", "false")
		}},
		{"head moved", ReasonBranchMismatch, func(t *testing.T, dir string) {
			hostGit(t, dir, "symbolic-ref", "HEAD", "refs/heads/other")
		}},
		{"alternates", ReasonUnsafeRepository, func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "objects", "info", "alternates"), []byte("/tmp\n"), 0o600)
		}},
		{"replaced by a symlink", ReasonUnsafeRepository, func(t *testing.T, dir string) {
			moved := dir + "-moved"
			os.Rename(dir, moved)
			os.Symlink(moved, dir)
		}},
		{"not a repository", ReasonNotBare, func(t *testing.T, dir string) {
			os.RemoveAll(dir)
			os.Mkdir(dir, 0o700)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t)
			first := hostGit(t, u.work, "rev-parse", "HEAD")
			dir, err := u.prepare(first)
			if err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, dir)
			before := u.fetchCount()
			_, err = u.prepare(first)
			wantSourceError(t, err, PhaseValidate, tc.reason, false)
			if u.fetchCount() != before {
				t.Fatal("a refused repository was fetched into")
			}
		})
	}
}

// Sixteen concurrent submits on a cold repository: one clone, at most one
// more fetch for everyone who arrived while it ran, all succeed.
func TestPrepareConcurrentSubmitsShare(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = u.prepare(first)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	if u.clones() != 1 || u.fetchCount() > 3 {
		t.Fatalf("clones %d, fetches %d for 16 submits", u.clones(), u.fetchCount())
	}
	dir := filepath.Join(u.root, DirName(testURL))
	hostGit(t, dir, "fsck", "--no-progress")
	if names := u.rootEntries(); len(names) != 1 {
		t.Fatalf("root holds %v", names)
	}
}

// History a tampered repository fakes (a graft file, a shallow list) is
// never honoured: a commit that is not on the default branch upstream
// does not pass as its ancestor.
func TestPrepareRefusesFakedHistory(t *testing.T) {
	for _, name := range []string{"info/grafts", "shallow"} {
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t)
			first := hostGit(t, u.work, "rev-parse", "HEAD")
			tip := u.commit("tip")
			u.push("main")
			dir, err := u.prepare(tip)
			if err != nil {
				t.Fatal(err)
			}
			tree := hostGit(t, dir, "rev-parse", first+"^{tree}")
			stranger := hostGit(t, dir, "commit-tree", "-m", "never upstream", tree)
			body := tip + " " + stranger + "\n"
			if name == "shallow" {
				body = first + "\n"
			}
			os.MkdirAll(filepath.Join(dir, "info"), 0o700)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if name == "info/grafts" {
				if _, err := u.prepare(stranger); err == nil {
					t.Fatal("a grafted commit passed as an ancestor of the default branch")
				}
			}
			_, err = u.prepare(tip)
			wantSourceError(t, err, PhaseValidate, ReasonUnsafeRepository, false)
		})
	}
}

// A fetch of one repository that hangs does not hold up a submit for
// another one.
func TestPrepareRepositoriesDoNotSerialize(t *testing.T) {
	u := newUpstream(t)
	const otherURL = "https://github.com/octo/other.git"
	other := filepath.Join(filepath.Dir(u.bare), "other.git")
	hostGit(t, u.work, "init", "-q", "--bare", other)
	hostGit(t, u.work, "push", "-q", other, "main")
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	if _, err := u.prepare(first); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.block, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := u.fetchCount()
	blocked := make(chan error, 1)
	go func() { _, err := u.prepare(first); blocked <- err }()
	for u.fetchCount() == before {
		time.Sleep(10 * time.Millisecond) // app's fetch hangs now
	}
	r := u.repo()
	r.ID, r.URL = "other", otherURL
	done := make(chan error, 1)
	go func() { _, err := u.p.Prepare(context.Background(), r, first); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // liveness bound only
		t.Fatal("a submit for another repository waits for app's fetch")
	}
	select {
	case err := <-blocked:
		t.Fatalf("app's fetch ended while blocked: %v", err)
	default:
	}
	os.Remove(u.block)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
}

// A submit that arrives while a fetch runs does not share it: it waits
// for a fetch that starts after it arrived, and so sees a commit pushed
// before it arrived.
func TestPrepareNoSharingWithEarlierFetch(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	if _, err := u.prepare(first); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.block, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := u.fetchCount()
	early := make(chan error, 1)
	go func() { _, err := u.prepare(first); early <- err }()
	for u.fetchCount() == before {
		time.Sleep(10 * time.Millisecond) // the early fetch has started
	}
	late := u.commit("pushed while a fetch runs")
	u.push("main")
	lateErr := make(chan error, 1)
	go func() { _, err := u.prepare(late); lateErr <- err }()
	time.Sleep(100 * time.Millisecond) // let the late submit queue
	os.Remove(u.block)
	if err := <-early; err != nil {
		t.Fatal(err)
	}
	if err := <-lateErr; err != nil {
		t.Fatalf("the late submit shared the earlier fetch: %v", err)
	}
	if got := u.fetchCount() - before; got != 2 {
		t.Fatalf("%d fetches, want 2", got)
	}
}

func TestPrepareCancelledSubmit(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	os.WriteFile(u.block, nil, 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := u.p.Prepare(ctx, u.repo(), first); done <- err }()
	for u.fetchCount() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wantSourceError(t, <-done, PhaseFetch, ReasonCancelled, true)
	os.Remove(u.block)
	// The shared fetch went on without the submit.
	if _, err := u.prepare(first); err != nil {
		t.Fatal(err)
	}
}

func TestNewSweepsTemporaryClones(t *testing.T) {
	u := newUpstream(t)
	stale := filepath.Join(u.root, tempPrefix+"123")
	if err := os.MkdirAll(filepath.Join(stale, "objects"), 0o700); err != nil {
		t.Fatal(err)
	}
	git := u.p.git
	if _, err := New(u.root, git, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("a temporary clone survived New")
	}
}

// A killed Gate's upload (or fetch) leaves its pack's .keep file, which
// would keep the pack out of every repack: New removes it.
func TestNewRemovesStaleKeeps(t *testing.T) {
	u := newUpstream(t)
	dir := filepath.Join(u.root, DirName(testURL), "objects", "pack")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "pack-"+strings.Repeat("a", 40)+".keep")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(u.root, u.p.git, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(keep); err == nil {
		t.Fatal("a stale .keep survived New")
	}
}

// A Gate (or its git) killed mid-fetch can leave the default branch's
// lock file, or after a power loss a torn ref file; the next submit
// recovers and sees the upstream's branch.
func TestPrepareRecoversFromKilledFetch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
	}{
		{"stale lock", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "main.lock"), []byte("0123"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"torn ref", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), []byte("3f2a"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty ref", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"ref to a missing commit", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), []byte(strings.Repeat("ab", 20)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t)
			first := hostGit(t, u.work, "rev-parse", "HEAD")
			dir, err := u.prepare(first)
			if err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, dir)
			next := u.commit("pushed after the crash")
			u.push("main")
			if _, err := u.prepare(next); err != nil {
				t.Fatalf("the next submit does not recover: %v", err)
			}
			if got := hostGit(t, dir, "rev-parse", "refs/heads/main"); got != next {
				t.Fatalf("main %s, want %s", got, next)
			}
			if _, err := os.Lstat(filepath.Join(dir, "refs", "heads", "main.lock")); err == nil {
				t.Fatal("the lock file is still there")
			}
			hostGit(t, dir, "fsck", "--no-progress")
		})
	}
}

// Whatever an earlier run or anyone else left in the Preparer's git home
// (a .netrc would hand git credentials) is gone when a Preparer starts.
func TestNewEmptiesTheGitHome(t *testing.T) {
	u := newUpstream(t)
	home := filepath.Join(u.root, homeDir)
	if err := os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine github.com login u password p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(u.root, u.p.git, nil, nil); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(home)
	if err != nil || len(ents) != 0 {
		t.Fatalf("git home after New: %v %v", ents, err)
	}
}

// hostileCommit commits, in the upstream's working clone, a tree of one
// entry git's fsck refuses (name → a blob of data, or a tree holding one
// when dir) on HEAD, and returns it.
func (u *upstream) hostileCommit(name, data string, dir bool) string {
	u.t.Helper()
	mk := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", u.work}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Seed", "GIT_AUTHOR_EMAIL=seed@example.invalid",
			"GIT_COMMITTER_NAME=Seed", "GIT_COMMITTER_EMAIL=seed@example.invalid")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			u.t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	entry := "100644 blob " + mk(data, "hash-object", "-w", "--stdin") + "\t" + name + "\n"
	if dir {
		entry = "040000 tree " + mk(entry, "mktree") + "\t.git\n"
	}
	c := mk("", "commit-tree", mk(entry, "mktree"), "-p", "HEAD", "-m", "hostile")
	mk("", "update-ref", "refs/heads/main", c)
	return c
}

// Every object the Gate fetches from upstream is fsck'd strictly: a tree
// with a .git entry or a .gitmodules whose url is an option fails the
// fetch (not retryable), and neither the branch nor the objects move.
func TestPrepareFscksUpstream(t *testing.T) {
	u := newUpstream(t)
	good := hostGit(t, u.work, "rev-parse", "HEAD")
	sub := u.hostileCommit(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch /tmp/owned\n", false)
	u.push("main")
	_, err := u.prepare(sub)
	wantSourceError(t, err, PhaseClone, ReasonFsckFailed, false)
	if ents := u.rootEntries(); len(ents) != 0 {
		t.Fatalf("a refused clone left %v", ents)
	}
	hostGit(t, u.work, "reset", "-q", "--hard", good)
	u.push("main")
	dir, err := u.prepare(good)
	if err != nil {
		t.Fatal(err)
	}
	dotgit := u.hostileCommit("config", "[core]\n", true)
	u.push("main")
	_, err = u.prepare(dotgit)
	wantSourceError(t, err, PhaseFetch, ReasonFsckFailed, false)
	if got := hostGit(t, dir, "rev-parse", "refs/heads/main"); got != good {
		t.Fatalf("main moved to %s", got)
	}
	if out := hostGit(t, dir, "cat-file", "--batch-all-objects", "--batch-check"); strings.Contains(out, dotgit) {
		t.Fatalf("the refused commit is stored")
	}
}

// A follow-up's base is a candidate the Gate stored: exactly the commit
// of a candidate ref, never one of a side branch or an expired ref.
func TestPrepareCandidateBase(t *testing.T) {
	u := newUpstream(t)
	first := hostGit(t, u.work, "rev-parse", "HEAD")
	if _, err := u.p.PrepareCandidate(context.Background(), u.repo(), first); err == nil {
		t.Fatal("a candidate base before the repository was prepared")
	}
	dir, err := u.prepare(first)
	if err != nil {
		t.Fatal(err)
	}
	hostGit(t, u.work, "checkout", "-q", "-b", "side")
	cand := u.commit("a candidate")
	// The candidate arrives as the Workers' bundles do: under its ref.
	hostGit(t, u.work, "push", "-q", dir, cand+":refs/agent-forge/candidates/"+strings.Repeat("a", 32)+"/"+strings.Repeat("b", 32))
	if got, err := u.p.PrepareCandidate(context.Background(), u.repo(), cand); err != nil || got != dir {
		t.Fatalf("candidate base: %q %v", got, err)
	}
	// On the default branch but no candidate: refused (Prepare's case).
	_, err = u.p.PrepareCandidate(context.Background(), u.repo(), first)
	wantSourceError(t, err, PhaseBase, ReasonBaseMissing, false)
	// In the repository, not named by a candidate ref.
	child := u.commit("after the candidate")
	hostGit(t, u.work, "push", "-q", dir, child+":refs/heads/elsewhere")
	_, err = u.p.PrepareCandidate(context.Background(), u.repo(), child)
	wantSourceError(t, err, PhaseBase, ReasonBaseMissing, false)
	_, err = u.p.PrepareCandidate(context.Background(), u.repo(), "not-a-sha")
	wantSourceError(t, err, PhaseBase, ReasonBaseMissing, false)
}

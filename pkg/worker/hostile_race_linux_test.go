package worker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// The race half of the hostile-agent suite (issue 34): a racer running as
// the Worker's account outside any sandbox (what a process outliving its
// plugin would be; the review ran it the same way) watches the workspace
// with inotify and strikes at the moment the Worker's trusted code is
// most exposed, through the real Worker code (the coding executor, a
// real Gate for the Gate layout). Each test runs raceRounds rounds, in
// every one of which the racer strikes (required: a round without a
// strike tried nothing), and reports tried=N struck=N reached=0.
//
// The strike comes after the Worker's reads of <tree>/.git once the
// plugin wrote its last file: validation digests the git metadata twice
// (the files alone, then the snapshot), the second read being the last
// before the Worker's staging; a change before it fails the attempt
// (that is what the digests are for), a change after it is what only a
// Worker that never reads the attempt's metadata survives.

// inotify event masks the racers use.
const (
	inCloseWrite   = 0x8
	inCloseNoWrite = 0x10
	inCreate       = 0x100
	inDelete       = 0x200
	inIsDir        = 0x40000000
)

// raceEvent is one inotify event: the watched directory and the name in
// it ("" for the directory itself).
type raceEvent struct {
	dir, name string
	mask      uint32
}

// watcher is a minimal inotify reader on the runtime's poller (Close
// ends Events).
type watcher struct {
	f     *os.File
	mu    sync.Mutex
	paths map[int32]string
}

func newWatcher(t *testing.T) *watcher {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	return &watcher{f: os.NewFile(uintptr(fd), "inotify"), paths: map[int32]string{}}
}

func (w *watcher) add(path string, mask uint32) error {
	wd, err := syscall.InotifyAddWatch(int(w.f.Fd()), path, mask)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.paths[int32(wd)] = path
	w.mu.Unlock()
	return nil
}

// events sends every event to fn until the watcher is closed.
func (w *watcher) events(fn func(raceEvent)) {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			w.mu.Lock()
			dir := w.paths[ev.Wd]
			w.mu.Unlock()
			fn(raceEvent{dir: dir, name: string(bytes.TrimRight(name, "\x00")), mask: ev.Mask})
		}
	}
}

// racer watches the attempts' containers under a worktree root; for each
// attempt whose plugin has written trigger (a file at the tree's root),
// it calls prepare once, then strike once: after the readsBefore-th read
// of the tree's .git file since then or, with onDelete, at the first
// entry deleted from the tree (cleanup's start), whichever comes first.
type racer struct {
	t           *testing.T
	w           *watcher
	trigger     string
	readsBefore int
	onDelete    bool
	// prepare runs when the plugin wrote trigger (nothing it does may
	// touch the tree or the container's git directory: no event may come
	// of it); strike is the attack itself, a single rename or exchange.
	prepare, strike func(container string)

	mu     sync.Mutex
	state  map[string]*raceAttempt // by tree path
	struck int
	wg     sync.WaitGroup
}

type raceAttempt struct {
	wrote bool
	reads int
	done  bool
}

func startRacer(t *testing.T, root string, r *racer) *racer {
	t.Helper()
	r.t, r.w, r.state = t, newWatcher(t), map[string]*raceAttempt{}
	if err := r.w.add(root, inCreate); err != nil {
		t.Fatal(err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.w.events(r.event)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *racer) stop() {
	r.w.f.Close()
	r.wg.Wait()
}

// strikes is how many attempts the racer struck.
func (r *racer) strikes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.struck
}

func (r *racer) watchTree(tree string) {
	r.mu.Lock()
	if _, ok := r.state[tree]; ok {
		r.mu.Unlock()
		return
	}
	r.state[tree] = &raceAttempt{}
	r.mu.Unlock()
	r.w.add(tree, inCloseWrite|inCloseNoWrite|inDelete)
}

func (r *racer) event(e raceEvent) {
	switch base := filepath.Base(e.dir); {
	case e.mask&inCreate != 0 && e.mask&inIsDir != 0 && strings.HasPrefix(e.name, "wt-") && !strings.HasPrefix(e.name, "wt-stage-"):
		c := filepath.Join(e.dir, e.name)
		r.w.add(c, inCreate)
		if fi, err := os.Lstat(filepath.Join(c, "tree")); err == nil && fi.IsDir() {
			r.watchTree(filepath.Join(c, "tree"))
		}
	case e.mask&inCreate != 0 && e.mask&inIsDir != 0 && e.name == "tree" && strings.HasPrefix(base, "wt-"):
		r.watchTree(filepath.Join(e.dir, e.name))
	default:
		r.mu.Lock()
		a := r.state[e.dir]
		r.mu.Unlock()
		if a == nil || a.done {
			return
		}
		container := filepath.Dir(e.dir)
		switch {
		case e.mask&inCloseWrite != 0 && e.name == r.trigger && !a.wrote:
			a.wrote = true
			r.prepare(container)
		case !a.wrote:
		case e.mask&inCloseNoWrite != 0 && e.name == ".git":
			if a.reads++; a.reads == r.readsBefore {
				r.hit(a, container)
			}
		case r.onDelete && e.mask&inDelete != 0:
			r.hit(a, container)
		}
	}
}

func (r *racer) hit(a *raceAttempt, container string) {
	a.done = true
	r.strike(container)
	r.mu.Lock()
	r.struck++
	r.mu.Unlock()
}

// renameExchange swaps two paths atomically (renameat2 RENAME_EXCHANGE).
func renameExchange(a, b string) error {
	pa, err := syscall.BytePtrFromString(a)
	if err != nil {
		return err
	}
	pb, err := syscall.BytePtrFromString(b)
	if err != nil {
		return err
	}
	sysRenameat2, cwd := uintptr(316), -100 // amd64; AT_FDCWD
	if runtime.GOARCH == "arm64" {
		sysRenameat2 = 276
	}
	const exchange = 2
	if _, _, e := syscall.Syscall6(sysRenameat2, uintptr(cwd), uintptr(unsafe.Pointer(pa)), uintptr(cwd), uintptr(unsafe.Pointer(pb)), exchange, 0); e != 0 {
		return e
	}
	return nil
}

// evilGit is what an evil git configuration runs: every command appends
// its name to marker. Its config text defines a clean filter (named by
// the tree's .gitattributes), an fsmonitor, a hooks directory (every
// hook git may run while staging, committing or updating a ref) and an
// include of a file that sets the same again.
type evilGit struct {
	marker, config string
}

func newEvilGit(t *testing.T, dir string) evilGit {
	t.Helper()
	e := evilGit{marker: filepath.Join(dir, "evil-ran")}
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+name+" >>'"+e.marker+"'\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hooks := filepath.Join(dir, "evil-hooks")
	os.Mkdir(hooks, 0o755)
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-index-change", "pre-auto-gc", "post-checkout"} {
		if err := os.Symlink(script("hook-"+h, "exit 0\n"), filepath.Join(hooks, h)); err != nil {
			t.Fatal(err)
		}
	}
	clean := script("filter-clean", "exec cat\n")
	monitor := script("fsmonitor", "exit 1\n")
	inc := filepath.Join(dir, "evil-include")
	incText := fmt.Sprintf("[filter \"evil\"]\n\tclean = %s\n\trequired = true\n[core]\n\tfsmonitor = %s\n", clean, monitor)
	if err := os.WriteFile(inc, []byte(incText), 0o644); err != nil {
		t.Fatal(err)
	}
	e.config = incText + fmt.Sprintf("[core]\n\thooksPath = %s\n[include]\n\tpath = %s\n", hooks, inc)
	return e
}

// ran reports (and clears) what the evil configuration ran.
func (e evilGit) ran() string {
	b, _ := os.ReadFile(e.marker)
	os.Remove(e.marker)
	return strings.Join(strings.Fields(string(b)), ",")
}

// adminOf finds the static worktree administrative directory whose
// gitdir names tree's .git, without opening anything in the tree.
func adminOf(repo, tree string) string {
	dirs, _ := filepath.Glob(filepath.Join(repo, ".git", "worktrees", "*"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "gitdir")); err == nil && strings.TrimSpace(string(b)) == filepath.Join(tree, ".git") {
			return d
		}
	}
	return ""
}

// raceInstruction writes the tree's .gitattributes (naming the evil
// filter) and then trigger, the racer's cue.
func raceInstruction(i int) string {
	return fmt.Sprintf("write .gitattributes * filter=evil\nwrite z.txt round %d", i)
}

const raceTrigger = "z.txt"

// Static layout: right after validation's last read of the metadata the
// racer renames into place a commondir naming a repository whose config
// is evil (a clean filter, fsmonitor, hooks, an include). It never runs.
func TestRaceEvilCommondirStatic(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	evil := newEvilGit(t, f.root)
	evilRepo := filepath.Join(f.root, "evil.git")
	gitT(t, f.root, "clone", "-q", "--bare", f.repo, evilRepo)
	gitT(t, evilRepo, "config", "core.bare", "false")
	cfg, _ := os.ReadFile(filepath.Join(evilRepo, "config"))
	if err := os.WriteFile(filepath.Join(evilRepo, "config"), append(cfg, evil.config...), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	staged := map[string]string{} // container: the prepared commondir
	r := startRacer(t, f.cfg.WorktreeRoot, &racer{trigger: raceTrigger, readsBefore: 2,
		prepare: func(c string) {
			admin := adminOf(f.repo, filepath.Join(c, "tree"))
			p := filepath.Join(c, "evil-commondir")
			if admin == "" || os.WriteFile(p, []byte(evilRepo+"\n"), 0o644) != nil {
				return
			}
			mu.Lock()
			staged[c] = admin
			mu.Unlock()
		},
		strike: func(c string) {
			mu.Lock()
			admin := staged[c]
			mu.Unlock()
			os.Rename(filepath.Join(c, "evil-commondir"), filepath.Join(admin, "commondir"))
		}})
	reached, codes := 0, map[string]int{}
	for i := 0; i < raceRounds; i++ {
		l := f.lease(wire.CodingTask{Instruction: raceInstruction(i)}, nil)
		l.JobID = fmt.Sprintf("job%d", i)
		codes[f.run(l).Code]++
		if ran := evil.ran(); ran != "" {
			reached++
			t.Errorf("round %d: the evil config ran in the Worker's git: %s", i, ran)
		}
	}
	t.Logf("tried=%d struck=%d reached=%d outcomes %v", raceRounds, r.strikes(), reached, codes)
	if r.strikes() != raceRounds {
		t.Fatalf("the racer struck %d of %d attempts", r.strikes(), raceRounds)
	}
}

// Gate layout: right after validation's last read of the metadata the
// racer renames an evil config over <container>/git/config. It never
// runs, and no candidate of such an attempt that ran it reaches the Gate.
func TestRaceEvilConfigGate(t *testing.T) {
	w := newPublicWorld(t, 1, "")
	evil := newEvilGit(t, w.root)
	cfg := w.workerConfig("worker-1", 1)
	r := startRacer(t, cfg.WorktreeRoot, &racer{trigger: raceTrigger, readsBefore: 2,
		prepare: func(c string) {
			good, err := os.ReadFile(filepath.Join(c, "git", "config"))
			if err == nil {
				os.WriteFile(filepath.Join(c, "evil-config"), append(good, evil.config...), 0o644)
			}
		},
		strike: func(c string) { os.Rename(filepath.Join(c, "evil-config"), filepath.Join(c, "git", "config")) }})
	ev := w.startPublicWorker(cfg, testToken)
	waitEvent(t, ev, EventConnected)
	base := w.advance(0)
	reached, codes := 0, map[string]int{}
	for i := 0; i < raceRounds; i++ {
		j := w.waitJob(w.submit(base, raceInstruction(i)))
		codes[j.Job.Status+"/"+j.Job.FailureCode]++
		if ran := evil.ran(); ran != "" {
			reached++
			t.Errorf("round %d: the evil config ran in the Worker's git: %s", i, ran)
		}
	}
	t.Logf("tried=%d struck=%d reached=%d outcomes %v", raceRounds, r.strikes(), reached, codes)
	// A job may take more than one attempt (each is struck).
	if r.strikes() < raceRounds {
		t.Fatalf("the racer struck %d attempts in %d jobs", r.strikes(), raceRounds)
	}
}

// outsideRepo makes a repository outside every root, its work tree
// holding the same names as an attempt's tree and a 0600 token: what a
// tree swapped for a link to it must never expose or lose.
func outsideRepo(t *testing.T, secret string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "victim")
	gitT(t, filepath.Dir(dir), "init", "-q", "-b", "main", dir)
	for _, n := range []string{"README", raceTrigger, ".gitattributes", "sub/file"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755)
		os.WriteFile(filepath.Join(dir, n), []byte("victim\n"), 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// victimIntact reports what of the outside repository is gone.
func victimIntact(dir string) string {
	var gone []string
	for _, n := range []string{"README", raceTrigger, ".gitattributes", "sub/file", "token", ".git/HEAD", ".git/config"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			gone = append(gone, n)
		}
	}
	return strings.Join(gone, ",")
}

// Commit: right after validation's last read of the metadata (the
// Worker's staging comes next) the racer exchanges the whole tree with a
// symbolic link to an outside repository holding a 0600 token. No
// candidate holds it.
func TestRaceTreeSwapCommit(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	const secret = "OUTSIDE-TOKEN-RACE-0600"
	victim := outsideRepo(t, secret)
	r := startRacer(t, f.cfg.WorktreeRoot, &racer{trigger: raceTrigger, readsBefore: 2,
		prepare: func(c string) { os.Symlink(victim, filepath.Join(c, "swap")) },
		strike:  func(c string) { renameExchange(filepath.Join(c, "tree"), filepath.Join(c, "swap")) }})
	reached, codes := 0, map[string]int{}
	for i := 0; i < raceRounds; i++ {
		l := f.lease(wire.CodingTask{Instruction: fmt.Sprintf("write %s round %d", raceTrigger, i)}, nil)
		l.JobID = fmt.Sprintf("job%d", i)
		codes[f.run(l).Code]++
		refs := gitT(t, f.repo, "for-each-ref", "--format=%(refname)", CandidatePrefix+l.JobID+"/")
		for _, ref := range strings.Fields(refs) {
			if out := gitT(t, f.repo, "ls-tree", "-r", "--name-only", ref); strings.Contains("\n"+out+"\n", "\ntoken\n") {
				reached++
				t.Errorf("round %d: candidate %s holds the outside token", i, ref)
			}
		}
		if gone := victimIntact(victim); gone != "" {
			t.Fatalf("round %d: the outside repository lost %s", i, gone)
		}
	}
	t.Logf("tried=%d struck=%d reached=%d outcomes %v", raceRounds, r.strikes(), reached, codes)
	if r.strikes() != raceRounds {
		t.Fatalf("the racer struck %d of %d attempts", r.strikes(), raceRounds)
	}
}

// Cleanup: when the Worker starts removing the attempt (its first
// deletion in the tree, or the old cleanup's git worktree remove reading
// .git once more), the racer exchanges the tree with a symbolic link to
// an outside repository. Nothing of it is deleted, and the next attempt
// runs.
func TestRaceTreeSwapCleanup(t *testing.T) {
	f := newCodingFixture(t, buildEditPlugin(t))
	victim := outsideRepo(t, "OUTSIDE-TOKEN-RACE-CLEANUP")
	r := startRacer(t, f.cfg.WorktreeRoot, &racer{trigger: raceTrigger, readsBefore: 3, onDelete: true,
		prepare: func(c string) { os.Symlink(victim, filepath.Join(c, "swap")) },
		strike:  func(c string) { renameExchange(filepath.Join(c, "tree"), filepath.Join(c, "swap")) }})
	reached, codes := 0, map[string]int{}
	for i := 0; i < raceRounds; i++ {
		l := f.lease(wire.CodingTask{Instruction: fmt.Sprintf("write %s round %d", raceTrigger, i)}, nil)
		l.JobID = fmt.Sprintf("job%d", i)
		rep := f.run(l)
		codes[rep.Code]++
		if gone := victimIntact(victim); gone != "" {
			reached++
			t.Errorf("round %d: cleanup deleted %s of the outside repository", i, gone)
			os.RemoveAll(victim)
			victim = outsideRepo(t, "OUTSIDE-TOKEN-RACE-CLEANUP")
		}
	}
	t.Logf("tried=%d struck=%d reached=%d outcomes %v", raceRounds, r.strikes(), reached, codes)
	if r.strikes() != raceRounds {
		t.Fatalf("the racer struck %d of %d attempts", r.strikes(), raceRounds)
	}
}

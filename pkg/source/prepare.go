package source

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Repository is one configured public source.
type Repository struct {
	ID     string // the Gate's repository id (logs only)
	URL    string // exactly as ParseURL accepted it
	Branch string // the default branch, the only one fetched
	// Timeout bounds each git command; OutputBytes bounds its output.
	Timeout     time.Duration
	OutputBytes int64
}

// Preparer prepares public-source repositories under one root. It is safe
// for concurrent use; every git command goes through gitx.
type Preparer struct {
	root   string
	git    string
	home   string
	log    *slog.Logger
	reaper *supervise.ReaperPool

	ctx  context.Context // fetches outlive the submits that wait for them
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	repos    map[string]*repoState   // by URL
	attempts map[string]*attemptLock // StoreCandidate's, by repository and ref

	maintaining sync.Mutex // one Repack at a time
}

// attemptLock serialises one attempt's candidate uploads; users counts
// who holds or waits for it.
type attemptLock struct {
	mu    sync.Mutex
	users int
}

// repoState serializes one repository's provisioning. At most one fetch
// runs (cur); submits that arrive while it runs wait for the next one,
// which starts when cur ends, so every fetch a submit waits for started
// after the submit arrived.
type repoState struct {
	mu   sync.Mutex
	cur  *fetch
	next *fetch
}

// fetch is one run of provisioning (validate or clone, then fetch).
type fetch struct {
	done chan struct{}
	err  error // set before done is closed
}

// homeDir is the git home the Preparer keeps under the root.
const homeDir = ".forge-git-home"

// tempPrefix names temporary clones under the root.
const tempPrefix = ".forge-clone-"

// New returns a Preparer for root (checked by CheckRoot) using the git
// executable git (checked by CheckGit). It creates the private git home
// under root afresh and removes temporary clones, bundle scratch
// repositories and pack .keep files an earlier run left behind.
// reaper, when not nil, runs every git under a reaper, so that a Gate
// killed mid-fetch leaves no git running (the binary dispatches
// supervise.ReaperArg); it stays the caller's to close, after Close.
func New(root, git string, log *slog.Logger, reaper *supervise.ReaperPool) (*Preparer, error) {
	if err := CheckRoot(root); err != nil {
		return nil, errors.New("source: public repository root: " + err.Error())
	}
	if err := CheckGit(git); err != nil {
		return nil, errors.New("source: git executable: " + err.Error())
	}
	// A fresh, empty git home: nothing left in it (a .netrc, which git's
	// HTTP transport would read for credentials) ever reaches a fetch.
	home := filepath.Join(root, homeDir)
	if err := os.RemoveAll(home); err != nil {
		return nil, errors.New("source: cannot empty the git home")
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, errors.New("source: cannot create the git home")
	}
	if fi, err := os.Lstat(home); err != nil || !fi.IsDir() || !ownedByMe(fi) || fi.Mode().Perm()&0o077 != 0 {
		return nil, errors.New("source: the git home is not a private directory of this user")
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, errors.New("source: cannot list the public repository root")
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) || strings.HasPrefix(e.Name(), scratchPrefix) {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return nil, errors.New("source: cannot remove an earlier temporary clone")
			}
		}
	}
	if err := removeStaleKeeps(root); err != nil {
		return nil, errors.New("source: cannot remove an earlier run's pack keep files")
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Preparer{root: root, git: git, home: home, log: log, reaper: reaper, ctx: ctx, stop: stop,
		repos: map[string]*repoState{}, attempts: map[string]*attemptLock{}}, nil
}

// Close cancels running fetches and waits for them.
func (p *Preparer) Close() {
	p.stop()
	p.wg.Wait()
}

// Dir is the prepared bare repository of r.
func (p *Preparer) Dir(r Repository) string { return Dir(p.root, r.URL) }

// Prepare brings r's bare repository up to date for a submit that arrived
// now and checks that base is a commit on the fetched default branch. It
// returns the repository's path, or an *Error (no path in it).
func (p *Preparer) Prepare(ctx context.Context, r Repository, base string) (string, error) {
	f := p.join(r)
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", &Error{Phase: PhaseFetch, Reason: ReasonCancelled, Retryable: true}
	}
	if f.err != nil {
		return "", f.err
	}
	dir := p.Dir(r)
	if err := p.checkBase(ctx, r, dir, base); err != nil {
		return "", err
	}
	return dir, nil
}

// PrepareCandidate is Prepare for a follow-up job (DECISIONS 18), whose
// base is not a commit of the default branch but a candidate the Gate
// stored for an earlier job of the same pull request: r's repository
// must be prepared already, and base must be the commit a candidate ref
// (ident.CandidateRefPrefix) names; nothing is fetched. A base no
// candidate ref names (never one, or its ref expired) is base_missing.
func (p *Preparer) PrepareCandidate(ctx context.Context, r Repository, base string) (string, error) {
	if !ident.ValidSHA(base) {
		return "", &Error{Phase: PhaseBase, Reason: ReasonBaseMissing}
	}
	dir := p.Dir(r)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", &Error{Phase: PhaseBase, Reason: ReasonBaseMissing}
	}
	out, err := p.runner(r).Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"for-each-ref", "--count=1", "--format=%(objectname)",
		"--points-at=" + base, "--", ident.CandidateRefPrefix}})
	if err != nil {
		return "", gitError(PhaseBase, err)
	}
	if strings.TrimSpace(string(out)) != base {
		return "", &Error{Phase: PhaseBase, Reason: ReasonBaseMissing}
	}
	return dir, nil
}

// join returns the fetch a submit arriving now waits for: a new one when
// none runs, else the one queued behind the running one.
func (p *Preparer) join(r Repository) *fetch {
	p.mu.Lock()
	st := p.repos[r.URL]
	if st == nil {
		st = &repoState{}
		p.repos[r.URL] = st
	}
	p.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cur == nil {
		st.cur = &fetch{done: make(chan struct{})}
		p.wg.Add(1)
		go p.run(st, st.cur, r)
		return st.cur
	}
	if st.next == nil {
		st.next = &fetch{done: make(chan struct{})}
	}
	return st.next
}

// run performs f, then starts the queued fetch, if any.
func (p *Preparer) run(st *repoState, f *fetch, r Repository) {
	defer p.wg.Done()
	for f != nil {
		f.err = p.provision(r)
		close(f.done)
		st.mu.Lock()
		st.cur, st.next = st.next, nil
		f = st.cur
		st.mu.Unlock()
	}
}

func (p *Preparer) runner(r Repository) *gitx.Runner {
	return &gitx.Runner{Git: p.git, Home: p.home, Timeout: r.Timeout, OutputBytes: r.OutputBytes, Reaper: p.reaper}
}

// provision clones r on first use or validates the existing bare
// repository, then fetches the default branch.
func (p *Preparer) provision(r Repository) error {
	start := time.Now()
	g := p.runner(r)
	dir := p.Dir(r)
	fi, err := os.Lstat(dir)
	kind := "fetch"
	switch {
	case errors.Is(err, os.ErrNotExist):
		kind = "clone"
		err = p.clone(g, r, dir)
	case err != nil:
		err = &Error{Phase: PhaseValidate, Reason: ReasonUnsafeRepository}
	default:
		if err = p.validate(g, r, dir, fi); err == nil {
			err = p.repairBranch(g, r, dir)
		}
		if err == nil {
			err = p.fetchBranch(g, r, dir, PhaseFetch)
		}
	}
	if p.log != nil {
		attrs := []any{"repository_id", r.ID, "kind", kind, "duration_ms", time.Since(start).Milliseconds()}
		var e *Error
		if errors.As(err, &e) {
			attrs = append(attrs, "phase", e.Phase, "reason", e.Reason)
		}
		p.log.Info("public source prepared", attrs...)
	}
	return err
}

// clone creates a temporary bare repository under the root, fetches the
// default branch into it and renames it into place.
func (p *Preparer) clone(g *gitx.Runner, r Repository, dir string) error {
	tmp, err := os.MkdirTemp(p.root, tempPrefix)
	if err != nil {
		return &Error{Phase: PhaseClone, Reason: ReasonLocalFailure, Retryable: true}
	}
	installed := false
	defer func() {
		if !installed {
			os.RemoveAll(tmp)
		}
	}()
	// No template: no sample hooks, no description, no info/exclude.
	if _, err := g.Run(p.ctx, gitx.Cmd{Args: []string{"init", "--quiet", "--bare", "--template=", "--initial-branch=" + r.Branch, tmp}}); err != nil {
		return gitError(PhaseClone, err)
	}
	if _, err := g.Run(p.ctx, gitx.Cmd{GitDir: tmp, Args: []string{"config", "remote.origin.url", r.URL}}); err != nil {
		return gitError(PhaseClone, err)
	}
	if err := p.fetchBranch(g, r, tmp, PhaseClone); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return &Error{Phase: PhaseClone, Reason: ReasonLocalFailure, Retryable: true}
	}
	installed = true
	return nil
}

// fetchBranch fetches exactly refs/heads/<branch> from the URL into the
// same ref: no tags, no other refs, no submodules, no FETCH_HEAD. Every
// received object is fsck'd strictly (git honours fetch.fsckObjects on
// a network fetch on every version we support, unlike on a bundle): a
// .git tree entry or a .gitmodules whose url is an option fails the
// fetch, and nothing of it stays.
func (p *Preparer) fetchBranch(g *gitx.Runner, r Repository, dir, phase string) error {
	ref := "refs/heads/" + r.Branch
	_, err := g.Run(p.ctx, gitx.Cmd{GitDir: dir, HTTPS: true, Args: []string{
		"-c", "fetch.fsckObjects=true",
		"fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head",
		"--no-auto-maintenance", r.URL, "+" + ref + ":" + ref}})
	var ge *gitx.Error
	if errors.As(err, &ge) && ge.OutputContains("fsck error") {
		return &Error{Phase: phase, Reason: ReasonFsckFailed}
	}
	if err != nil {
		return gitError(phase, err)
	}
	return nil
}

// repairBranch undoes what a fetch killed mid-way (the Gate or its git
// stopped by a crash or a timeout's SIGKILL) can leave in a validated
// repository, which would otherwise fail every later fetch: the default
// branch's lock file, or a loose ref that no longer names a commit (torn
// by a power loss). Only the Preparer writes that branch, one provisioning
// at a time per repository, so a lock found here is stale. The fetch that
// follows writes the ref anew.
func (p *Preparer) repairBranch(g *gitx.Runner, r Repository, dir string) error {
	loose := filepath.Join(dir, "refs", "heads", filepath.FromSlash(r.Branch))
	if fi, err := os.Lstat(loose + ".lock"); err == nil {
		if !fi.Mode().IsRegular() {
			return &Error{Phase: PhaseValidate, Reason: ReasonUnsafeRepository}
		}
		if err := os.Remove(loose + ".lock"); err != nil {
			return &Error{Phase: PhaseFetch, Reason: ReasonLocalFailure, Retryable: true}
		}
	}
	_, err := g.Run(p.ctx, gitx.Cmd{GitDir: dir, Args: []string{"rev-parse", "--verify", "--quiet", "refs/heads/" + r.Branch + "^{commit}"}})
	if err == nil {
		return nil
	}
	if _, exited := gitx.ExitCode(err); !exited {
		return gitError(PhaseFetch, err)
	}
	if fi, err := os.Lstat(loose); err == nil {
		if !fi.Mode().IsRegular() {
			return &Error{Phase: PhaseValidate, Reason: ReasonUnsafeRepository}
		}
		if err := os.Remove(loose); err != nil {
			return &Error{Phase: PhaseFetch, Reason: ReasonLocalFailure, Retryable: true}
		}
	}
	return nil
}

// checkBase requires base to be a commit in dir and an ancestor of (or
// equal to) the fetched default branch.
func (p *Preparer) checkBase(ctx context.Context, r Repository, dir, base string) error {
	g := p.runner(r)
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"cat-file", "-e", base + "^{commit}"}}); err != nil {
		if _, exited := gitx.ExitCode(err); exited {
			return &Error{Phase: PhaseBase, Reason: ReasonBaseMissing}
		}
		return gitError(PhaseBase, err)
	}
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"merge-base", "--is-ancestor", base, "refs/heads/" + r.Branch}}); err != nil {
		if code, exited := gitx.ExitCode(err); exited && code == 1 {
			return &Error{Phase: PhaseBase, Reason: ReasonBaseNotOnBranch}
		}
		return gitError(PhaseBase, err)
	}
	return nil
}

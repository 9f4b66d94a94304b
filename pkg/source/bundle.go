package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// Bundles cross the Gate/Worker boundary (DECISIONS 15): the base of a
// public-source lease goes out as a bundle of the base minus the commits
// the Worker already has, and the candidate comes back as a bundle whose
// only prerequisite is the base. Both are made and checked in a scratch
// repository under the root (.forge-scratch-*, removed by New): a bare
// repository without template whose objects/info/alternates names the
// prepared repository's objects, so it reads the prepared history and
// writes nothing into it. Only StoreCandidate, after every check, writes
// the prepared repository: the candidate's objects and its ref.

// scratchPrefix names scratch repositories under the root.
const scratchPrefix = ".forge-scratch-"

// baseRef is the one ref a base bundle carries (in the scratch repository
// and in the bundle; never in the prepared repository).
const baseRef = "refs/forge/base"

// BaseRef is the ref a base bundle names its base by.
const BaseRef = baseRef

// BundleError is a refused bundle request or candidate: a fixed reason
// word (never a path, a value or git's output).
type BundleError struct{ Reason string }

func (e *BundleError) Error() string { return "source: bundle: " + e.Reason }

// Bundle refusal reasons.
const (
	ReasonBundleMalformed     = "malformed_bundle"     // header, pack or objects git refuses
	ReasonBundlePrerequisites = "wrong_prerequisites"  // not exactly the base as the one prerequisite
	ReasonBundleRef           = "wrong_ref"            // not exactly the attempt's candidate ref at the announced commit
	ReasonBundleCommits       = "not_one_new_commit"   // more (or fewer) than one commit beyond the base
	ReasonBundleParent        = "wrong_parent"         // the commit's parents are not exactly the base
	ReasonBundleTree          = "wrong_tree"           // the commit's tree is not the announced one
	ReasonBundleIdentity      = "identity_not_allowed" // author or committer not the ones the task allows
	ReasonBundleHeaders       = "unexpected_headers"   // commit headers beyond tree, parent, author, committer
	ReasonBundleRefTaken      = "candidate_ref_taken"  // the candidate ref exists at another commit
	ReasonNothingToSend       = "nothing_to_send"      // the base is within what the Worker has
)

// scratch creates a scratch repository reading dir's objects and returns
// the directory holding it (r.git); the caller removes it. It is written
// by hand, not by git init (one process less per bundle): what git needs
// of a bare repository, HEAD, config, refs/ and objects/, with
// objects/info/alternates naming dir's objects.
func (p *Preparer) scratch(dir string) (string, error) {
	tmp, err := os.MkdirTemp(p.root, scratchPrefix)
	if err != nil {
		return "", &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	repo := filepath.Join(tmp, "r.git")
	files := []struct{ name, data string }{
		{"HEAD", "ref: refs/heads/main\n"},
		{"config", "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"},
		{filepath.Join("objects", "info", "alternates"), filepath.Join(dir, "objects") + "\n"},
	}
	err = errors.Join(os.MkdirAll(filepath.Join(repo, "refs", "heads"), 0o700),
		os.MkdirAll(filepath.Join(repo, "objects", "info"), 0o700),
		os.MkdirAll(filepath.Join(repo, "objects", "pack"), 0o700))
	for _, f := range files {
		if err == nil {
			err = os.WriteFile(filepath.Join(repo, f.name), []byte(f.data), 0o600)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	return tmp, nil
}

// Scratch returns a new private directory under the root for a bundle in
// transit (a candidate's upload); the caller removes it.
func (p *Preparer) Scratch() (string, error) {
	d, err := os.MkdirTemp(p.root, scratchPrefix)
	if err != nil {
		return "", &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	return d, nil
}

// BaseBundle writes a bundle of base minus haves from the prepared
// repository dir and returns its path and a cleanup. Haves the repository
// does not hold as commits are ignored (they only ever narrow the
// bundle); the bundle's one ref is BaseRef at base, so it holds exactly
// the objects reachable from base and not from the remaining haves.
func (p *Preparer) BaseBundle(ctx context.Context, r Repository, dir, base string, haves []string) (string, func(), error) {
	g := p.runner(r)
	tmp, err := p.scratch(dir)
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	repo := filepath.Join(tmp, "r.git")
	known, err := commitsIn(ctx, g, repo, append([]string{base}, haves...))
	if err != nil {
		cleanup()
		return "", nil, err
	}
	if !known[base] {
		cleanup()
		return "", nil, &Error{Phase: PhaseBundle, Reason: ReasonBaseMissing}
	}
	// The scratch repository's one ref, written as a loose ref.
	if err := os.MkdirAll(filepath.Join(repo, "refs", "forge"), 0o700); err != nil {
		cleanup()
		return "", nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	if err := os.WriteFile(filepath.Join(repo, filepath.FromSlash(baseRef)), []byte(base+"\n"), 0o600); err != nil {
		cleanup()
		return "", nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	args := []string{"bundle", "create", "--quiet", filepath.Join(tmp, "base.bundle"), baseRef}
	for _, h := range haves {
		if known[h] {
			args = append(args, "^"+h)
		}
	}
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: args}); err != nil {
		cleanup()
		var ge *gitx.Error
		if errors.As(err, &ge) && ge.OutputContains("empty bundle") {
			return "", nil, &BundleError{Reason: ReasonNothingToSend}
		}
		return "", nil, gitError(PhaseBundle, err)
	}
	return filepath.Join(tmp, "base.bundle"), cleanup, nil
}

// commitsIn reports which of shas are commits in repo (one cat-file).
func commitsIn(ctx context.Context, g *gitx.Runner, repo string, shas []string) (map[string]bool, error) {
	var in bytes.Buffer
	for _, s := range shas {
		in.WriteString(s + "\n")
	}
	out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Stdin: in.Bytes(), Args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}})
	if err != nil {
		return nil, gitError(PhaseBundle, err)
	}
	known := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if sha, ok := strings.CutSuffix(line, " commit"); ok {
			known[sha] = true
		}
	}
	return known, nil
}

// Candidate is what a candidate bundle must carry, exactly.
type Candidate struct {
	Dir    string // the prepared repository (the job's)
	Base   string
	Commit string // the announced candidate
	Tree   string // its announced tree
	Ref    string // the attempt's candidate ref
	// Author and Committer are the identities allowed ("Name <email>").
	Author, Committer string
}

// StoreCandidate checks the bundle at path against c and, when every
// check passes and fenced still returns nil, stores the candidate's
// objects and creates c.Ref at c.Commit in c.Dir (or finds it there at
// c.Commit already): the pack its verification fetched is moved in as
// it is. Checks: the header names exactly c.Base as the one
// prerequisite and exactly c.Ref at c.Commit; git bundle verify passes in
// a scratch repository; fetching it there with every object checked
// (transfer.fsckObjects) succeeds; exactly one commit lies beyond the
// base; that commit has exactly the headers tree (c.Tree), parent
// (c.Base), author (c.Author) and committer (c.Committer), in that order,
// with dates as the Worker writes them. A refusal is a *BundleError and
// stores nothing; fenced's error is returned as is.
func (p *Preparer) StoreCandidate(ctx context.Context, r Repository, c Candidate, path string, fenced func() error) error {
	if err := checkCandidateHeader(path, c); err != nil {
		return err
	}
	g := p.runner(r)
	tmp, err := p.scratch(c.Dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "r.git")
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"bundle", "verify", "--quiet", path}}); err != nil {
		return refusedOr(err, ReasonBundlePrerequisites)
	}
	const got = "refs/forge/candidate"
	// Kept as a pack (never unpacked into loose objects), which is then
	// moved into the prepared repository as it is.
	if err := fetchBundle(ctx, g, repo, path, "+"+c.Ref+":"+got, "transfer.unpackLimit=1"); err != nil {
		return refusedOr(err, ReasonBundleMalformed)
	}
	out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"rev-list", "--max-count=2", got, "--not", c.Base}})
	if err != nil {
		return gitError(PhaseBundle, err)
	}
	if string(out) != c.Commit+"\n" {
		return &BundleError{Reason: ReasonBundleCommits}
	}
	raw, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"cat-file", "commit", c.Commit}})
	if err != nil {
		return gitError(PhaseBundle, err)
	}
	if err := checkCommitHeaders(raw, c); err != nil {
		return err
	}
	if err := fenced(); err != nil {
		return err
	}
	if err := movePacks(filepath.Join(repo, "objects", "pack"), filepath.Join(c.Dir, "objects", "pack")); err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: c.Dir, Args: []string{"update-ref", "--no-deref", c.Ref, c.Commit, strings.Repeat("0", 40)}}); err != nil {
		now, lerr := g.Line(ctx, gitx.Cmd{GitDir: c.Dir, Args: []string{"rev-parse", "--verify", "--quiet", c.Ref}})
		if lerr == nil && now == c.Commit {
			return nil // the same candidate, stored by an earlier upload of this attempt
		}
		if lerr == nil {
			return &BundleError{Reason: ReasonBundleRefTaken}
		}
		return gitError(PhaseBundle, err)
	}
	return nil
}

// fetchBundle fetches refspec from the bundle at path into repo, every
// received object checked, no tags, no FETCH_HEAD, no maintenance; extra
// are more -c settings.
func fetchBundle(ctx context.Context, g *gitx.Runner, repo, path, refspec string, extra ...string) error {
	args := []string{"-c", "transfer.fsckObjects=true"}
	for _, e := range extra {
		args = append(args, "-c", e)
	}
	_, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Bundle: true, Args: append(args, "fetch", "--quiet", "--no-tags",
		"--no-write-fetch-head", "--no-auto-maintenance", "--no-recurse-submodules", path, refspec)})
	return err
}

// movePacks moves the checked packs of a scratch repository into the
// prepared repository's pack directory: each pack before its index (git
// sees a pack once its index is there), a pack already present (same
// name, same content) left as it is. Nothing else is ever in from.
func movePacks(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, suffix := range []string{".pack", ".rev", ".idx"} {
		for _, e := range ents {
			name := e.Name()
			if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, suffix) || !e.Type().IsRegular() {
				continue
			}
			if _, err := os.Lstat(filepath.Join(to, name)); err == nil {
				continue
			}
			if err := os.Rename(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// refusedOr maps a git command that exited non-zero to a refusal with
// reason, anything else (a timeout, a local failure) to an *Error.
func refusedOr(err error, reason string) error {
	if _, exited := gitx.ExitCode(err); exited {
		return &BundleError{Reason: reason}
	}
	return gitError(PhaseBundle, err)
}

// checkCandidateHeader parses the bundle's header (gitx.ParseBundleHeader)
// and requires exactly c.Base as prerequisite and c.Ref at c.Commit.
func checkCandidateHeader(path string, c Candidate) error {
	f, err := os.Open(path)
	if err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	defer f.Close()
	buf := make([]byte, gitx.MaxBundleHeaderBytes+gitx.MaxBundleLineBytes+8)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	h, err := gitx.ParseBundleHeader(buf[:n])
	if err != nil {
		return &BundleError{Reason: ReasonBundleMalformed}
	}
	if len(h.Prerequisites) != 1 || h.Prerequisites[0].SHA != c.Base {
		return &BundleError{Reason: ReasonBundlePrerequisites}
	}
	if len(h.Refs) != 1 || h.Refs[0] != (gitx.BundleRef{SHA: c.Commit, Name: c.Ref}) {
		return &BundleError{Reason: ReasonBundleRef}
	}
	return nil
}

// checkCommitHeaders requires the raw commit's headers to be exactly
// tree, one parent, author and committer, as c says, each date
// "<seconds> +0000".
func checkCommitHeaders(raw []byte, c Candidate) error {
	head, _, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return &BundleError{Reason: ReasonBundleHeaders}
	}
	lines := strings.Split(string(head), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "tree ") || !strings.HasPrefix(lines[1], "parent ") ||
		!strings.HasPrefix(lines[2], "author ") || !strings.HasPrefix(lines[3], "committer ") {
		return &BundleError{Reason: ReasonBundleHeaders}
	}
	if lines[1] != "parent "+c.Base {
		return &BundleError{Reason: ReasonBundleParent}
	}
	if lines[0] != "tree "+c.Tree {
		return &BundleError{Reason: ReasonBundleTree}
	}
	if !identityLine(lines[2], "author ", c.Author) || !identityLine(lines[3], "committer ", c.Committer) {
		return &BundleError{Reason: ReasonBundleIdentity}
	}
	return nil
}

// identityLine reports whether line is prefix, who, and a date of decimal
// seconds at +0000.
func identityLine(line, prefix, who string) bool {
	rest, ok := strings.CutPrefix(line, prefix+who+" ")
	if !ok {
		return false
	}
	secs, ok := strings.CutSuffix(rest, " +0000")
	if !ok || secs == "" || len(secs) > 12 {
		return false
	}
	for i := 0; i < len(secs); i++ {
		if secs[i] < '0' || secs[i] > '9' {
			return false
		}
	}
	return true
}

// CandidateAt returns the commit ref names in the prepared repository
// dir; a missing ref is a *gitx.Error.
func (p *Preparer) CandidateAt(ctx context.Context, r Repository, dir, ref string) (string, error) {
	return p.runner(r).Line(ctx, gitx.Cmd{GitDir: dir, Args: []string{"rev-parse", "--verify", "--quiet", ref + "^{commit}"}})
}

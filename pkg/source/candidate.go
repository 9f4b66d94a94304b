package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// A candidate bundle comes from a Worker, which the boundary treats as
// hostile (DECISIONS 15): it may carry any bytes. StoreCandidate lets git
// read its pack only once Go has scanned it within bounds, indexes it
// strictly (every object fsck'd) into a scratch repository whose only view
// of the prepared repository is its alternates, and then stores a pack it
// wrote itself of exactly the candidate's new objects: nothing the Worker
// sent beyond them ever reaches the prepared repository, refused or not.

// Bounds of a candidate's pack besides its size in bytes.
const (
	// MaxCandidateObjects bounds the objects of one candidate's pack.
	MaxCandidateObjects = 200_000
	// maxCandidateDepth bounds a delta chain in a candidate's pack (git's
	// own default pack.depth).
	maxCandidateDepth = 50
	// DefaultCandidateUnpackedBytes bounds what a candidate's objects add
	// up to, deltas counted by their results, unless the Candidate says
	// otherwise.
	DefaultCandidateUnpackedBytes = 1 << 30
	// indexCacheBytes is git's delta base cache while it indexes a
	// candidate (core.deltaBaseCacheLimit).
	indexCacheBytes = 64 << 20
	// DefaultCandidateGitMemoryBytes bounds the memory of each git a
	// candidate's upload runs, unless the Candidate says otherwise.
	DefaultCandidateGitMemoryBytes = 512 << 20
)

// Candidate is what a candidate bundle must carry, exactly.
type Candidate struct {
	Dir    string // the prepared repository (the job's)
	Base   string
	Commit string // the announced candidate
	Tree   string // its announced tree
	Ref    string // the attempt's candidate ref
	// Author and Committer are the identities allowed ("Name <email>").
	Author, Committer string
	// UnpackedBytes bounds the sum of the pack's object sizes
	// (0: DefaultCandidateUnpackedBytes); one object is bounded by it too.
	UnpackedBytes int64
	// GitMemoryBytes bounds each git the upload runs (gitx.Runner's
	// MemoryBytes; 0: DefaultCandidateGitMemoryBytes).
	GitMemoryBytes int64
}

// StoreCandidate checks the bundle at path against c and, when every
// check passes and fenced still returns nil, stores the candidate's
// objects and creates c.Ref at c.Commit in c.Dir. Uploads of one attempt
// run one at a time. In order:
//   - the header names exactly c.Base as the one prerequisite and exactly
//     c.Ref at c.Commit;
//   - c.Ref is looked up: at c.Commit already, the upload is accepted and
//     nothing is read or stored; at another commit, it is refused
//     (candidate_ref_taken);
//   - the pack is scanned in Go (gitx.ScanPack): at most
//     MaxCandidateObjects objects, c.UnpackedBytes in all and per object,
//     delta chains of at most maxCandidateDepth, every reference delta
//     based on an object of the base's tree (what a thin pack may lean on);
//   - git index-pack --strict --fix-thin indexes it in a scratch repository
//     (every object fsck'd, .git entries and hostile .gitmodules included);
//   - exactly one commit lies beyond the base, with exactly the headers
//     tree (c.Tree), parent (c.Base), author (c.Author) and committer
//     (c.Committer), dates as the Worker writes them;
//   - the pack holds exactly the objects of c.Commit not reachable from
//     c.Base (rev-list --objects c.Commit --not c.Base): none more, none
//     taken from elsewhere in the repository (another job's candidate);
//   - fenced returns nil.
//
// Every git of the upload runs within c.GitMemoryBytes: one that needs
// more (say, to resolve a delta that declares 1 GiB, within the scan's
// bounds) fails at once and the candidate is refused (memory_exceeded).
//
// Then git pack-objects writes those objects, and only those, into a new
// pack moved into c.Dir (kept from repacks until then), and c.Ref is
// created. A refusal is a
// *BundleError and stores nothing; fenced's error is returned as is.
func (p *Preparer) StoreCandidate(ctx context.Context, r Repository, c Candidate, path string, fenced func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	defer f.Close()
	packAt, err := checkCandidateHeader(f, c)
	if err != nil {
		return err
	}
	unlock := p.lockAttempt(c.Dir + "\x00" + c.Ref)
	defer unlock()
	g := p.runner(r)
	g.MemoryBytes = c.GitMemoryBytes
	if g.MemoryBytes <= 0 {
		g.MemoryBytes = DefaultCandidateGitMemoryBytes
	}
	switch now, err := refAt(ctx, g, c.Dir, c.Ref); {
	case err != nil:
		return err
	case now == c.Commit:
		return fenced() // stored by an earlier upload of this attempt
	case now != "":
		return &BundleError{Reason: ReasonBundleRefTaken}
	}
	scan, err := scanCandidatePack(f, packAt, c)
	if err != nil {
		return err
	}
	tmp, err := p.scratch(c.Dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "r.git")
	if err := checkThinBases(ctx, g, repo, c.Base, scan.RefBases); err != nil {
		return err
	}
	if _, err := f.Seek(packAt, io.SeekStart); err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, StdinFrom: f, Args: append(indexConfig(),
		"index-pack", "--strict", "--fix-thin", "--stdin")})
	if err != nil {
		return indexRefusal(err)
	}
	received, err := packObjects(repo, out)
	if err != nil {
		return err
	}
	if out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"rev-list", "--max-count=2", c.Commit, "--not", c.Base}}); err != nil {
		return refusedOr(err, ReasonBundleMalformed)
	} else if string(out) != c.Commit+"\n" {
		return &BundleError{Reason: ReasonBundleCommits}
	}
	raw, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"cat-file", "commit", c.Commit}})
	if err != nil {
		return candidateGitError(err)
	}
	if err := checkCommitHeaders(raw, c); err != nil {
		return err
	}
	// Connectivity through the scratch repository sees the whole prepared
	// repository; requiring every object to be in the received pack is
	// what limits it to the base's history.
	list, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"rev-list", "--objects", "--no-object-names", c.Commit, "--not", c.Base}})
	if err != nil {
		return refusedOr(err, ReasonBundleMalformed)
	}
	if err := sameObjects(list, received, scan.Objects); err != nil {
		return err
	}
	if err := fenced(); err != nil {
		return err
	}
	outDir := filepath.Join(tmp, "out")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	// Deltas of the received pack are reused only on bases in the set and
	// within git's default depth; nothing is searched anew.
	name, err := g.Line(ctx, gitx.Cmd{GitDir: repo, Stdin: list, Args: []string{"-c", "pack.threads=1",
		"pack-objects", "-q", "--window=0", "--depth=" + strconv.Itoa(maxCandidateDepth), "--delta-base-offset",
		filepath.Join(outDir, "pack")}})
	if err != nil {
		return candidateGitError(err)
	}
	if !validHex(name) {
		return &Error{Phase: PhaseBundle, Reason: ReasonGitFailed, Retryable: true}
	}
	// Until the ref exists, a .keep file keeps a concurrent repack
	// (maintain.go) from dropping the pack's objects as unreachable.
	packDir := filepath.Join(c.Dir, "objects", "pack")
	keep := filepath.Join(packDir, "pack-"+name+".keep")
	if err := os.WriteFile(keep, []byte("agent-forge candidate\n"), 0o600); err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	defer os.Remove(keep)
	if err := gitx.MovePacks(outDir, packDir); err != nil {
		return &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: c.Dir, Args: []string{"update-ref", "--no-deref", c.Ref, c.Commit, strings.Repeat("0", 40)}}); err != nil {
		return gitError(PhaseBundle, err)
	}
	return nil
}

// lockAttempt serialises StoreCandidate per attempt (key: repository and
// ref) and returns the unlock.
func (p *Preparer) lockAttempt(key string) func() {
	p.mu.Lock()
	l := p.attempts[key]
	if l == nil {
		l = &attemptLock{}
		p.attempts[key] = l
	}
	l.users++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.attempts, key)
		}
		p.mu.Unlock()
	}
}

// refAt returns the commit ref names in dir, "" when there is no such
// ref.
func refAt(ctx context.Context, g *gitx.Runner, dir, ref string) (string, error) {
	now, err := g.Line(ctx, gitx.Cmd{GitDir: dir, Args: []string{"rev-parse", "--verify", "--quiet", ref}})
	if err == nil {
		return now, nil
	}
	if code, exited := gitx.ExitCode(err); exited && code == 1 {
		return "", nil
	}
	return "", gitError(PhaseBundle, err)
}

// scanCandidatePack scans the pack at offset packAt of f within c's bounds.
func scanCandidatePack(f *os.File, packAt int64, c Candidate) (gitx.PackScan, error) {
	if _, err := f.Seek(packAt, io.SeekStart); err != nil {
		return gitx.PackScan{}, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	total := c.UnpackedBytes
	if total <= 0 {
		total = DefaultCandidateUnpackedBytes
	}
	scan, err := gitx.ScanPack(f, gitx.PackLimits{Objects: MaxCandidateObjects, ObjectBytes: total, TotalBytes: total, Depth: maxCandidateDepth})
	switch {
	case gitx.IsPackLimit(err):
		return scan, &BundleError{Reason: ReasonBundleUnpacked}
	case err != nil:
		return scan, &BundleError{Reason: ReasonBundleMalformed}
	}
	return scan, nil
}

// indexConfig are the settings of an index-pack of a hostile pack: one
// thread, a bounded delta base cache.
func indexConfig() []string {
	return []string{"-c", "pack.threads=1", "-c", "core.deltaBaseCacheLimit=" + strconv.Itoa(indexCacheBytes)}
}

// indexRefusal maps a failed index-pack of a received pack: its memory
// bound's or its fsck's refusal, another refusal of the pack, or a local
// failure.
func indexRefusal(err error) error {
	var ge *gitx.Error
	if _, exited := gitx.ExitCode(err); exited && !gitx.OutOfMemory(err) && errors.As(err, &ge) && ge.OutputContains("fsck error") {
		return &BundleError{Reason: ReasonBundleFsck}
	}
	return refusedOr(err, ReasonBundleMalformed)
}

// candidateGitError maps a failed git of an upload that reads only what
// earlier checks accepted: past its memory bound, a refusal; anything
// else, a local failure.
func candidateGitError(err error) error {
	if gitx.OutOfMemory(err) {
		return &BundleError{Reason: ReasonBundleMemory}
	}
	return gitError(PhaseBundle, err)
}

// checkThinBases requires every base a reference delta names to be an
// object of base's tree (or base itself): what a thin pack of a commit on
// base leans on. Without a reference delta, nothing runs.
func checkThinBases(ctx context.Context, g *gitx.Runner, repo, base string, refs []string) error {
	if len(refs) == 0 {
		return nil
	}
	out, err := g.Run(ctx, gitx.Cmd{GitDir: repo, Args: []string{"rev-list", "--objects", "--no-object-names", "--no-walk", base}})
	if err != nil {
		return candidateGitError(err)
	}
	in := map[string]bool{}
	for _, sha := range strings.Fields(string(out)) {
		in[sha] = true
	}
	for _, r := range refs {
		if !in[r] {
			return &BundleError{Reason: ReasonBundleObjects}
		}
	}
	return nil
}

// packObjects returns the ids of the objects in the pack index-pack
// reported on out ("pack\t<name>\n") in repo.
func packObjects(repo string, out []byte) (map[string]bool, error) {
	name, ok := strings.CutPrefix(strings.TrimSuffix(string(out), "\n"), "pack\t")
	if !ok || !validHex(name) {
		return nil, &Error{Phase: PhaseBundle, Reason: ReasonGitFailed, Retryable: true}
	}
	idx, err := os.ReadFile(filepath.Join(repo, "objects", "pack", "pack-"+name+".idx"))
	if err != nil {
		return nil, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	ids, err := gitx.PackIndexIDs(idx)
	if err != nil {
		return nil, &Error{Phase: PhaseBundle, Reason: ReasonGitFailed, Retryable: true}
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set, nil
}

// sameObjects requires the objects list names (one id a line, distinct:
// rev-list's) to be exactly the received pack's own objects: each is in
// it, and there are as many as the pack had entries (so none is extra,
// none repeated; index-pack's thin bases are not entries).
func sameObjects(list []byte, received map[string]bool, entries int) error {
	n := 0
	for _, sha := range strings.Fields(string(list)) {
		if !received[sha] {
			return &BundleError{Reason: ReasonBundleObjects}
		}
		n++
	}
	if n != entries {
		return &BundleError{Reason: ReasonBundleObjects}
	}
	return nil
}

func validHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// checkCandidateHeader parses the bundle's header (gitx.ParseBundleHeader),
// requires exactly c.Base as prerequisite and c.Ref at c.Commit, and
// returns where the pack starts.
func checkCandidateHeader(f *os.File, c Candidate) (int64, error) {
	buf := make([]byte, gitx.MaxBundleHeaderBytes+gitx.MaxBundleLineBytes+8)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, &Error{Phase: PhaseBundle, Reason: ReasonLocalFailure, Retryable: true}
	}
	h, err := gitx.ParseBundleHeader(buf[:n])
	if err != nil {
		return 0, &BundleError{Reason: ReasonBundleMalformed}
	}
	if len(h.Prerequisites) != 1 || h.Prerequisites[0].SHA != c.Base {
		return 0, &BundleError{Reason: ReasonBundlePrerequisites}
	}
	if len(h.Refs) != 1 || h.Refs[0] != (gitx.BundleRef{SHA: c.Commit, Name: c.Ref}) {
		return 0, &BundleError{Reason: ReasonBundleRef}
	}
	return int64(h.Size), nil
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

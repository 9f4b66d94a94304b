package source

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
)

// A prepared repository stays bounded: the Gate (which knows which jobs
// are finished) names the candidate refs that expire and the commits that
// must survive, CandidateRefs lists the refs page by page, ExpireRefs
// deletes those that go, PinBases pins those commits, and Repack repacks
// once packs pile up. The repack is git repack -a -d: one new pack of everything
// reachable, moved in before any old pack is deleted, so a reader (a base
// bundle, a delivery's push) always finds every object it was reading,
// and what expired refs alone held is gone. Objects that are not reachable
// yet but must stay are protected the way git protects a fetch's pack
// until its ref is written: a .keep file. StoreCandidate keeps its pack so
// from the move until the candidate ref exists; a fetch's index-pack does
// the same. New removes .keep files a killed Gate left.

// basePinPrefix holds one ref per commit PinBases keeps, so that a
// repack keeps it even once no branch reaches it (a default branch
// force-pushed upstream under a job that still needs its base).
const basePinPrefix = "refs/agent-forge/bases/"

// Bounds of a maintenance's git.
const (
	// maintainOutputBytes bounds the listing of a repository's pins
	// (about 90 bytes a pin, one per open job's base).
	maintainOutputBytes = 64 << 20
	// maxRefListingBytes bounds the listing of a repository's candidate
	// refs (about 130 bytes a ref, up to 200 with the longest ids), which
	// goes to a temporary file, not to memory.
	maxRefListingBytes = 4 << 30
	// candidatePage is how many candidate refs CandidateRefs hands over
	// at a time.
	candidatePage = 10_000
	// repackTimeout bounds one repack, beyond the repository's git_timeout.
	repackTimeout = 30 * time.Minute
	// pruneGrace is the age past which an unreachable loose object goes
	// (git gc's own default).
	pruneGrace = "2.weeks.ago"
)

// CandidateRef is one candidate ref of a prepared repository.
type CandidateRef struct {
	Name   string // refs/agent-forge/candidates/<job>/<attempt>
	JobID  string
	Commit string
}

// CandidateRefs calls each with the candidate refs of r's prepared
// repository (none when it does not exist yet), at most candidatePage at a
// time, each page its own slice. git lists them into a temporary file
// first, so a listing of any size (up to maxRefListingBytes) is never held
// in memory whole and the repository's git_timeout bounds the listing
// alone, not what each does with a page. Refs under the prefix that are
// not a valid candidate ref are not listed (and never deleted). An error
// of each stops the listing and is returned.
func (p *Preparer) CandidateRefs(ctx context.Context, r Repository, each func([]CandidateRef) error) error {
	dir := p.Dir(r)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	tmp, err := p.Scratch()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	f, err := os.OpenFile(filepath.Join(tmp, "refs"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &Error{Phase: PhaseMaintain, Reason: ReasonLocalFailure, Retryable: true}
	}
	defer f.Close()
	g := p.runner(r)
	err = g.Stream(ctx, gitx.Cmd{GitDir: dir, Args: []string{"for-each-ref", "--format=%(objectname) %(refname)", ident.CandidateRefPrefix}},
		maxRefListingBytes, func(out io.Reader) error {
			if _, err := io.Copy(f, out); err != nil {
				return &Error{Phase: PhaseMaintain, Reason: ReasonLocalFailure, Retryable: true}
			}
			return nil
		})
	var se *Error
	switch {
	case errors.As(err, &se):
		return err
	case err != nil:
		return gitError(PhaseMaintain, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return &Error{Phase: PhaseMaintain, Reason: ReasonLocalFailure, Retryable: true}
	}
	// A valid line is at most 64 hex digits, a space and the prefix with
	// two ids; a longer one is skipped whole.
	in := bufio.NewReaderSize(f, 4096)
	page := make([]CandidateRef, 0, candidatePage)
	for {
		line, err := in.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = in.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return &Error{Phase: PhaseMaintain, Reason: ReasonLocalFailure, Retryable: true}
		}
		if !long {
			sha, name, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
			if ok && validHex(sha) && ident.ValidCandidateRef(name) {
				job, _, _ := strings.Cut(strings.TrimPrefix(name, ident.CandidateRefPrefix), "/")
				page = append(page, CandidateRef{Name: name, JobID: job, Commit: sha})
			}
		}
		if len(page) == candidatePage || (errors.Is(err, io.EOF) && len(page) > 0) {
			if err := each(page); err != nil {
				return err
			}
			page = make([]CandidateRef, 0, candidatePage)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// ExpireRefs deletes refs (candidate refs, each only while it still names
// its Commit) in one ref transaction and returns how many it deleted. The
// caller keeps jobs from being submitted between its reading of the open
// jobs' bases (none of refs may be one) and this (the Gate's pins lock,
// pkg/gate maintain.go).
func (p *Preparer) ExpireRefs(ctx context.Context, r Repository, refs []CandidateRef) (int, error) {
	dir := p.Dir(r)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return 0, nil
	}
	var tx strings.Builder
	n := 0
	for _, e := range refs {
		if ident.ValidCandidateRef(e.Name) && validHex(e.Commit) {
			tx.WriteString("delete " + e.Name + " " + e.Commit + "\n")
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := p.runner(r).Run(ctx, gitx.Cmd{GitDir: dir, Stdin: []byte(tx.String()), Args: []string{"update-ref", "--stdin"}}); err != nil {
		return 0, gitError(PhaseMaintain, err)
	}
	return n, nil
}

// PinBases pins exactly keep's commits (those the repository holds) under
// basePinPrefix, so that every repack keeps them; pins of commits no
// longer listed go. Like ExpireRefs, it runs under the caller's lock
// against submits.
func (p *Preparer) PinBases(ctx context.Context, r Repository, keep []string) error {
	dir := p.Dir(r)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	g := p.runner(r)
	pins, err := p.pinUpdates(ctx, g, dir, keep)
	if err != nil || pins == "" {
		return err
	}
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Stdin: []byte(pins), Args: []string{"update-ref", "--stdin"}}); err != nil {
		return gitError(PhaseMaintain, err)
	}
	return nil
}

// Repack repacks r's prepared repository when it holds more than limit
// packs, and returns how many it held and whether it repacked. It runs
// beside base bundles, uploads and fetches without blocking them;
// repacks run one at a time.
func (p *Preparer) Repack(ctx context.Context, r Repository, limit int) (int, bool, error) {
	p.maintaining.Lock()
	defer p.maintaining.Unlock()
	dir := p.Dir(r)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return 0, false, nil
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.pack"))
	if len(packs) <= limit {
		return len(packs), false, nil
	}
	g := p.runner(r)
	g.Timeout = max(g.Timeout, repackTimeout)
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Args: append(indexConfig(), "repack", "-a", "-d", "-q")}); err != nil {
		return len(packs), false, gitError(PhaseMaintain, err)
	}
	// Loose objects no ref reaches (what a force-pushed branch left, a
	// copy of an expired object) go once older than pruneGrace; younger
	// ones may be a fetch's that has not written its ref yet.
	if _, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"prune", "--expire=" + pruneGrace}}); err != nil {
		return len(packs), true, gitError(PhaseMaintain, err)
	}
	return len(packs), true, nil
}

// pinUpdates returns the update-ref lines that make the pins exactly the
// commits of keep dir holds.
func (p *Preparer) pinUpdates(ctx context.Context, g *gitx.Runner, dir string, keep []string) (string, error) {
	list := *g
	list.OutputBytes = maintainOutputBytes
	out, err := list.Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"for-each-ref", "--format=%(objectname) %(refname)", basePinPrefix}})
	if err != nil {
		return "", gitError(PhaseMaintain, err)
	}
	var valid []string
	for _, k := range keep {
		if validHex(k) {
			valid = append(valid, k)
		}
	}
	held, err := commitsIn(ctx, g, dir, valid)
	if err != nil {
		return "", err
	}
	var lines strings.Builder
	pinned := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if held[sha] && name == basePinPrefix+sha {
			pinned[sha] = true
			continue
		}
		lines.WriteString("delete " + name + " " + sha + "\n")
	}
	for _, k := range valid {
		if held[k] && !pinned[k] {
			pinned[k] = true
			lines.WriteString("create " + basePinPrefix + k + " " + k + "\n")
		}
	}
	return lines.String(), nil
}

// removeStaleKeeps removes the .keep files of the prepared repositories
// under root: at startup nothing writes there, so each is what a killed
// Gate's upload or fetch left, and would keep its pack out of every
// repack.
func removeStaleKeeps(root string) error {
	keeps, err := filepath.Glob(filepath.Join(root, "*.git", "objects", "pack", "pack-*.keep"))
	if err != nil {
		return err
	}
	for _, k := range keeps {
		if fi, err := os.Lstat(k); err == nil && fi.Mode().IsRegular() {
			if err := os.Remove(k); err != nil {
				return err
			}
		}
	}
	return nil
}

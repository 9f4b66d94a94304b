package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
)

// A prepared repository stays bounded: the Gate (which knows which jobs
// are finished) names the candidate refs that expire and the commits that
// must survive, UpdateRefs deletes those refs and pins those commits, and
// Repack repacks once packs pile up. The repack is git repack -a -d: one new pack of everything
// reachable, moved in before any old pack is deleted, so a reader (a base
// bundle, a delivery's push) always finds every object it was reading,
// and what expired refs alone held is gone. Objects that are not reachable
// yet but must stay are protected the way git protects a fetch's pack
// until its ref is written: a .keep file. StoreCandidate keeps its pack so
// from the move until the candidate ref exists; a fetch's index-pack does
// the same. New removes .keep files a killed Gate left.

// basePinPrefix holds one ref per commit Maintenance.Keep names, so that a
// repack keeps it even once no branch reaches it (a default branch
// force-pushed upstream under a job that still needs its base).
const basePinPrefix = "refs/agent-forge/bases/"

// Bounds of a maintenance's git.
const (
	// maintainOutputBytes bounds the listing of a repository's candidate
	// refs (about 130 bytes a ref).
	maintainOutputBytes = 64 << 20
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

// Maintenance is the refs UpdateRefs changes in a prepared repository.
type Maintenance struct {
	// Expire lists candidate refs to delete, each only while it still
	// names its Commit.
	Expire []CandidateRef
	// Keep lists commits every repack keeps (pinned under
	// refs/agent-forge/bases/); pins of commits no longer listed go.
	Keep []string
}

// CandidateRefs lists the candidate refs of r's prepared repository (none
// when it does not exist yet). Refs under the prefix that are not a
// valid candidate ref are not listed (and never deleted).
func (p *Preparer) CandidateRefs(ctx context.Context, r Repository) ([]CandidateRef, error) {
	dir := p.Dir(r)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil, nil
	}
	g := p.runner(r)
	g.OutputBytes = maintainOutputBytes
	out, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"for-each-ref", "--format=%(objectname) %(refname)", ident.CandidateRefPrefix}})
	if err != nil {
		return nil, gitError(PhaseMaintain, err)
	}
	var refs []CandidateRef
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(line, " ")
		if !ok || !validHex(sha) || !ident.ValidCandidateRef(name) {
			continue
		}
		job, _, _ := strings.Cut(strings.TrimPrefix(name, ident.CandidateRefPrefix), "/")
		refs = append(refs, CandidateRef{Name: name, JobID: job, Commit: sha})
	}
	return refs, nil
}

// UpdateRefs deletes m.Expire's refs and pins exactly m.Keep's commits
// (those the repository holds), in one ref transaction, and returns how
// many candidate refs it deleted. The caller keeps jobs from being
// submitted between its reading of the open jobs' bases and this (the
// Gate's pins lock, pkg/gate maintain.go): a base checked then would be
// neither pinned nor kept by the ref it was found through.
func (p *Preparer) UpdateRefs(ctx context.Context, r Repository, m Maintenance) (int, error) {
	dir := p.Dir(r)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return 0, nil
	}
	g := p.runner(r)
	var tx strings.Builder
	expired := 0
	for _, e := range m.Expire {
		if !ident.ValidCandidateRef(e.Name) || !validHex(e.Commit) {
			continue
		}
		tx.WriteString("delete " + e.Name + " " + e.Commit + "\n")
		expired++
	}
	pins, err := p.pinUpdates(ctx, g, dir, m.Keep)
	if err != nil {
		return 0, err
	}
	tx.WriteString(pins)
	if tx.Len() > 0 {
		if _, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Stdin: []byte(tx.String()), Args: []string{"update-ref", "--stdin"}}); err != nil {
			return 0, gitError(PhaseMaintain, err)
		}
	}
	return expired, nil
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
	out, err := g.Run(ctx, gitx.Cmd{GitDir: dir, Args: []string{"for-each-ref", "--format=%(objectname) %(refname)", basePinPrefix}})
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

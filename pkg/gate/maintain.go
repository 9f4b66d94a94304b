package gate

import (
	"context"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/source"
)

// The prepared repositories stay bounded (pkg/source maintain.go): every
// repositoryMaintenanceEvery, and once when the Gate starts serving, the
// candidate refs of jobs that finished more than candidate_ref_ttl ago
// are deleted, except one whose commit a job still open (a follow-up's
// base, DECISIONS 18) builds on; a job delivering is open, so its
// delivery keeps its candidate. The bases of open jobs are pinned, and a
// repository holding more than repack_packs packs is repacked. This runs
// beside the lease sweeper, not in it: a repack can take minutes, an
// expiry sweep must not wait for it. It pauses in storage_full (a
// repack needs space while it runs).

// repositoryMaintenanceEvery is how often the prepared repositories are
// maintained.
const repositoryMaintenanceEvery = time.Hour

// maintenanceLoop maintains the prepared repositories until the Gate
// stops.
func (g *Gate) maintenanceLoop() {
	defer g.wg.Done()
	if g.sources == nil {
		return
	}
	tick := time.NewTicker(repositoryMaintenanceEvery)
	defer tick.Stop()
	for {
		g.maintainRepositories(g.ctx)
		select {
		case <-g.ctx.Done():
			return
		case <-g.failed:
			return
		case <-tick.C:
		}
	}
}

// maintainRepositories maintains each prepared repository of the
// configuration once; a failure is logged and waits for the next round.
func (g *Gate) maintainRepositories(ctx context.Context) {
	if g.sources == nil || g.storage.hard.Load() || g.storage.deferred.Load() {
		return
	}
	seen := map[string]bool{}
	for i := range g.cfg.Repositories {
		r := &g.cfg.Repositories[i]
		dir := g.preparedDir(r)
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		if err := g.maintainRepository(ctx, r, dir); err != nil && ctx.Err() == nil {
			g.log.Warn("repository maintenance failed", "repository_id", r.ID, "error", err.Error())
		}
	}
}

// basePins orders submits and maintenance's pin updates. A submit checks
// its base in the prepared repository (on the default branch, found
// through a ref) and then stores its job; maintenance reads the open
// jobs' bases and then deletes expired candidate refs and every pin not
// among them, before it repacks. A job stored between that read and the
// update would have its base neither pinned nor known to be needed, and
// a repack could drop it (a base the default branch left, force-pushed
// upstream). So maintenance reads and updates under mu, and a submit
// stores its job under mu's read lock, only when no update ran (gen
// unchanged) since before it checked its base; otherwise it checks again
// (prepareHeld, source.go).
type basePins struct {
	mu  sync.RWMutex
	gen uint64 // pin updates so far
}

// maintainRepository expires r's candidate refs that may go (a page of
// refs at a time), pins its open jobs' bases and repacks it when packs
// piled up.
func (g *Gate) maintainRepository(ctx context.Context, r *RepositoryConfig, dir string) error {
	src := publicSource(r)
	start := time.Now()
	expired := 0
	err := g.sources.CandidateRefs(ctx, src, func(page []source.CandidateRef) error {
		ids := make([]string, 0, len(page))
		for _, ref := range page {
			ids = append(ids, ref.JobID)
		}
		// A finished job stays finished: this may be read before the lock.
		done, err := g.st.FinishedBefore(ctx, ids, g.now().Add(-g.cfg.candidateRefTTL()))
		if err != nil || len(done) == 0 {
			return err
		}
		n, err := g.expireRefs(ctx, src, dir, page, done)
		expired += n
		return err
	})
	if err != nil {
		return err
	}
	if err := g.pinBases(ctx, src, dir); err != nil {
		return err
	}
	packs, repacked, err := g.sources.Repack(ctx, src, g.cfg.repackPacks())
	if err != nil {
		return err
	}
	if expired > 0 || repacked {
		g.log.Info("repository maintained", "repository_id", r.ID, "candidate_refs_expired", expired,
			"packs", packs, "repacked", repacked, "duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}

// expireRefs reads the open jobs' bases of dir and, under the same lock,
// deletes the refs of page whose job is done and that no open job builds
// on (basePins).
func (g *Gate) expireRefs(ctx context.Context, src source.Repository, dir string, page []source.CandidateRef, done map[string]bool) (int, error) {
	g.pins.mu.Lock()
	defer g.pins.mu.Unlock()
	keep, err := g.st.OpenBases(ctx, dir)
	if err != nil {
		return 0, err
	}
	needed := map[string]bool{}
	for _, k := range keep {
		needed[k] = true
	}
	var expire []source.CandidateRef
	for _, ref := range page {
		if done[ref.JobID] && !needed[ref.Commit] {
			expire = append(expire, ref)
		}
	}
	if len(expire) == 0 {
		return 0, nil
	}
	// Counted even when the update fails: it may have been applied.
	g.pins.gen++
	return g.sources.ExpireRefs(ctx, src, expire)
}

// pinBases reads the open jobs' bases of dir and, under the same lock,
// pins exactly those (basePins).
func (g *Gate) pinBases(ctx context.Context, src source.Repository, dir string) error {
	g.pins.mu.Lock()
	defer g.pins.mu.Unlock()
	keep, err := g.st.OpenBases(ctx, dir)
	if err != nil {
		return err
	}
	g.pins.gen++
	return g.sources.PinBases(ctx, src, keep)
}

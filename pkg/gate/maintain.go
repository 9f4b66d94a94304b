package gate

import (
	"context"
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

// maintainRepository expires r's candidate refs that may go, pins its
// open jobs' bases and repacks it when packs piled up.
func (g *Gate) maintainRepository(ctx context.Context, r *RepositoryConfig, dir string) error {
	src := publicSource(r)
	refs, err := g.sources.CandidateRefs(ctx, src)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(refs))
	for _, ref := range refs {
		ids = append(ids, ref.JobID)
	}
	done, err := g.st.FinishedBefore(ctx, ids, g.now().Add(-g.cfg.candidateRefTTL()))
	if err != nil {
		return err
	}
	keep, err := g.st.OpenBases(ctx, dir)
	if err != nil {
		return err
	}
	needed := map[string]bool{}
	for _, k := range keep {
		needed[k] = true
	}
	var expire []source.CandidateRef
	for _, ref := range refs {
		if done[ref.JobID] && !needed[ref.Commit] {
			expire = append(expire, ref)
		}
	}
	start := time.Now()
	res, err := g.sources.Maintain(ctx, src, source.Maintenance{Expire: expire, Keep: keep, PackLimit: g.cfg.repackPacks()})
	if err != nil {
		return err
	}
	if res.Expired > 0 || res.Repacked {
		g.log.Info("repository maintained", "repository_id", r.ID, "candidate_refs_expired", res.Expired,
			"packs", res.Packs, "repacked", res.Repacked, "duration_ms", time.Since(start).Milliseconds())
	}
	return nil
}

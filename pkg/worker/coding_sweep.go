package worker

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// SweepLeftovers removes what coding attempts of an earlier run of this
// Worker left behind when it stopped abruptly (a crash defers cleanup):
// worktree containers (wt-*) under worktree_root and, in every configured
// repository, the worktree registrations that name a worktree under
// worktree_root (sweepRegistrations); SweepRuntime clears runtime_root.
// Call it once at startup, before any lane runs: worktree_root belongs to
// this Worker alone. It returns an error, without a path, when something
// could not be removed.
func (x *CodingExecutor) SweepLeftovers(ctx context.Context) error {
	failed := !removeEntries(x.cfg.WorktreeRoot, "wt-")
	for _, r := range x.cfg.Repositories {
		if r.Gate {
			continue // attempts on it keep everything in their container
		}
		rp, ok := locateRepo(x.cfg, r.Path)
		if !ok {
			continue // reported per job (repository_unavailable)
		}
		failed = !sweepRegistrations(rp.common, x.cfg.WorktreeRoot) || failed
	}
	if failed {
		return errors.New("sweep: some leftovers of earlier coding attempts could not be removed")
	}
	return nil
}

// sweepRegistrations removes the entries of <common>/worktrees whose
// gitdir file (read through a descriptor, bounded) names a path under
// worktreeRoot: this Worker's attempts. git worktree prune is not used: it
// follows paths an agent's leftovers may have shaped. Other worktrees (the
// operator's) stay. It reports whether every such entry was removed.
func sweepRegistrations(common, worktreeRoot string) bool {
	dir := filepath.Join(common, "worktrees")
	d, err := openDirNoFollow(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return false
	}
	ok := true
	for _, n := range names {
		b, err := readAttemptFile(filepath.Join(dir, n, "gitdir"), maxGitFile)
		if err != nil || !strings.HasPrefix(string(b), worktreeRoot+string(filepath.Separator)) {
			continue
		}
		ok = removeTree(filepath.Join(dir, n)) == nil && ok
	}
	return ok
}

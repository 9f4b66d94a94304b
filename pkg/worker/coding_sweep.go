package worker

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// SweepLeftovers removes what coding attempts of an earlier run of this
// Worker left behind when it stopped abruptly (a crash defers cleanup):
// worktree containers (wt-*) under worktree_root and the stale worktree
// registrations of every configured repository (git worktree prune);
// SweepRuntime clears runtime_root. Call it once at startup, before any
// lane runs: worktree_root belongs to this Worker alone. It returns an
// error, without a path, when something could not be removed.
func (x *CodingExecutor) SweepLeftovers(ctx context.Context) error {
	failed := !removeEntries(x.cfg.WorktreeRoot, "wt-")
	home, err := os.MkdirTemp(x.cfg.RuntimeRoot, "git-")
	if err != nil {
		return errors.New("sweep: cannot create a private git home")
	}
	defer os.RemoveAll(home)
	g := &gitx.Runner{Git: x.opt.Git, Home: home, Timeout: time.Minute}
	for _, r := range x.cfg.Repositories {
		if r.Gate {
			continue // attempts on it keep everything in their container
		}
		rp, ok := locateRepo(x.cfg, r.Path)
		if !ok {
			continue // reported per job (repository_unavailable)
		}
		if _, err := g.Run(ctx, gitx.Cmd{GitDir: rp.common, Args: []string{"worktree", "prune"}}); err != nil {
			failed = true
		}
	}
	if failed {
		return errors.New("sweep: some leftovers of earlier coding attempts could not be removed")
	}
	return nil
}

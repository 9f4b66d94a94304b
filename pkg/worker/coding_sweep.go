package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// SweepLeftovers removes what coding attempts of an earlier run of this
// Worker left behind when it stopped abruptly (a crash defers cleanup):
// worktree containers (wt-*) under worktree_root, private git and check
// directories (git-*, check-*) under runtime_root, and the stale worktree
// registrations of every configured repository (git worktree prune). Call
// it once at startup, before any lane runs: worktree_root and
// runtime_root belong to this Worker alone. It returns an error, without
// a path, when something could not be removed.
func (x *CodingExecutor) SweepLeftovers(ctx context.Context) error {
	failed := false
	sweep := func(dir string, prefixes ...string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			failed = true
			return
		}
		for _, e := range ents {
			for _, p := range prefixes {
				if strings.HasPrefix(e.Name(), p) {
					if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
						failed = true
					}
				}
			}
		}
	}
	sweep(x.cfg.WorktreeRoot, "wt-")
	sweep(x.cfg.RuntimeRoot, "git-", "check-")
	home, err := os.MkdirTemp(x.cfg.RuntimeRoot, "git-")
	if err != nil {
		return errors.New("sweep: cannot create a private git home")
	}
	defer os.RemoveAll(home)
	g := &gitx.Runner{Git: x.opt.Git, Home: home, Timeout: time.Minute}
	for _, r := range x.cfg.Repositories {
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

package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSweepLeftovers(t *testing.T) {
	f := newCodingFixture(t, "/bin/true")
	// A crashed attempt: a registered worktree in a container, private dirs.
	wt := filepath.Join(f.cfg.WorktreeRoot, "wt-crashed", "tree")
	gitT(t, f.repo, "worktree", "add", "-q", "--detach", wt, f.base)
	for _, d := range []string{"git-1", "check-2", "plugin-3"} {
		if err := os.Mkdir(filepath.Join(f.cfg.RuntimeRoot, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(f.cfg.WorktreeRoot, "operator-notes")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SweepLeftovers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(wt)); !os.IsNotExist(err) {
		t.Fatal("the crashed worktree container remains")
	}
	if list := gitT(t, f.repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Fatalf("the crashed worktree is still registered:\n%s", list)
	}
	ents, _ := os.ReadDir(f.cfg.RuntimeRoot)
	if len(ents) != 1 || ents[0].Name() != "plugin-3" {
		t.Fatalf("runtime root after sweep: %v", ents)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("a file the sweep does not own was removed")
	}
}

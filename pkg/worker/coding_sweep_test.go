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
	// A crashed attempt: a registered worktree in a container.
	wt := filepath.Join(f.cfg.WorktreeRoot, "wt-crashed", "tree")
	gitT(t, f.repo, "worktree", "add", "-q", "--detach", wt, f.base)
	// The operator's own worktree, outside worktree_root, stays registered.
	mine := filepath.Join(f.root, "operator-wt")
	gitT(t, f.repo, "worktree", "add", "-q", "--detach", mine, f.base)
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
	if list := gitT(t, f.repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 2 || !strings.Contains(list, "worktree "+mine+"\n") {
		t.Fatalf("the crashed worktree is still registered:\n%s", list)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("a file the sweep does not own was removed")
	}
}

// What invocations a SIGKILLed Worker left in runtime_root goes at the next
// start, read-only directories a plugin made included; entries that are
// not the Worker's stay.
func TestSweepRuntime(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"git-1", "check-2", "plugin-3", "plugin-4/sub"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "plugin-3", "scratch.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "plugin-4", "sub", "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"plugin-4/sub", "plugin-4"} {
		if err := os.Chmod(filepath.Join(root, d), 0o500); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "operator-notes"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SweepRuntime(root); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 || ents[0].Name() != "operator-notes" {
		t.Fatalf("runtime root after sweep: %v", ents)
	}
	if err := SweepRuntime(filepath.Join(root, "missing")); err == nil || strings.Contains(err.Error(), root) {
		t.Fatalf("missing root: %v", err)
	}
}

package main

import (
	"os"
	"path/filepath"
)

// sparseSize is what a planted file claims to hold: 1 TiB, no block of
// it written.
const sparseSize = 1 << 40

// plantSparse is the plugin's whole work for the instructions
// "sparse-meta" and "sparse-tree": it makes 1 TiB sparse files of its git
// metadata (the HEAD its worktree's .git names, that git directory's
// config and a hook, and on a static registration the repository's
// config and a hook) or of a file of its tree, then ends as a success, so
// the Worker validates what it left. Every plant is reported
// (sparse-plant: OK is never a reach, the script judges the Worker:
// the job must fail, the Worker live on, the next jobs run).
func (a *agent) plantSparse(dir, what string) {
	var targets []string
	if what == "sparse-tree" {
		targets = []string{filepath.Join(dir, "sparse.bin")}
	} else if admin, ok := gitdirOf(dir); ok {
		targets = []string{filepath.Join(admin, "HEAD"), filepath.Join(admin, "config"), filepath.Join(admin, "hooks", "pre-commit")}
		if a.layout == "" { // a static worktree: the repository's own files
			common := filepath.Dir(filepath.Dir(admin))
			targets = append(targets, filepath.Join(common, "config"), filepath.Join(common, "hooks", "pre-commit"))
		}
	}
	for _, p := range targets {
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = sparseFile(p)
		}
		outcome := "planted"
		if err != nil {
			outcome = "refused: " + err.Error()
		}
		a.add("sparse-plant", p+" "+outcome, false, nil)
	}
}

func sparseFile(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		return err
	}
	if err := f.Truncate(sparseSize); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

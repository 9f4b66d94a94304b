package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// AttemptDirs are one coding attempt's directories: the one place that
// computes them (a sandbox around the plugin and the scoped checks
// builds its rules from it).
//
// Every attempt has a private 0700 Container under worktree_root holding
// its Workspace (the plugin's working tree, "tree"). An attempt on a Gate
// registration is self-contained: its own repository, GitDir
// (<container>/git, the workspace's .git file points at it), holds its
// refs, index, config and every object the attempt writes, and borrows
// the base's history read-only from SharedObjects (the source cache's
// objects, through objects/info/alternates): it needs write access to
// Container alone. An attempt on a static registration is a git worktree
// of the operator's repository: GitDir is the worktree's administrative
// directory inside that repository's common dir, and SharedObjects is the
// common dir's objects, which git writes there.
type AttemptDirs struct {
	Container     string
	Workspace     string
	GitDir        string
	SharedObjects string
}

// gateAttemptDirs is the layout of an attempt on a Gate registration in
// container, borrowing cache's objects.
func gateAttemptDirs(container, cache string) AttemptDirs {
	return AttemptDirs{
		Container:     container,
		Workspace:     filepath.Join(container, "tree"),
		GitDir:        filepath.Join(container, "git"),
		SharedObjects: filepath.Join(cache, "objects"),
	}
}

// Dirs returns the attempt's directories once preparation made them (the
// zero value before).
func (j *codingJob) Dirs() AttemptDirs {
	if j.wt == "" {
		return AttemptDirs{}
	}
	if j.gate {
		return j.gateDirs
	}
	return AttemptDirs{Container: j.container, Workspace: j.wt, GitDir: j.admin, SharedObjects: filepath.Join(j.repo.common, "objects")}
}

// addAttemptRepo creates the private container and, in it, the attempt's
// own repository borrowing cache's objects, checked out detached at the
// base; then saves the private index the Worker stages with.
func (j *codingJob) addAttemptRepo(ctx context.Context, cache string) error {
	c, err := os.MkdirTemp(j.x.cfg.WorktreeRoot, "wt-")
	if err != nil {
		return err
	}
	j.container = c
	if err := os.Chmod(c, 0o700); err != nil {
		return err
	}
	d := gateAttemptDirs(c, cache)
	if _, err := j.git.Run(ctx, gitx.Cmd{Args: []string{"init", "--quiet", "--template=", "--separate-git-dir=" + d.GitDir, d.Workspace}}); err != nil {
		return err
	}
	info := filepath.Join(d.GitDir, "objects", "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(info, "alternates"), []byte(d.SharedObjects+"\n"), 0o600); err != nil {
		return err
	}
	if _, err := j.git.Run(ctx, gitx.Cmd{GitDir: d.GitDir, WorkTree: d.Workspace, Dir: d.Workspace, Env: stagingConfigEnv(),
		Args: []string{"checkout", "--quiet", "--detach", j.task.BaseSHA}}); err != nil {
		return err
	}
	if admin, ok := attemptGitFile(d.Workspace); !ok || admin != d.GitDir {
		return errors.New("attempt repository layout")
	}
	j.gateDirs = d
	j.repo = repoPaths{path: d.GitDir, common: d.GitDir}
	j.wt, j.admin = d.Workspace, d.GitDir
	if err := j.initStage(ctx, d.SharedObjects); err != nil {
		return err
	}
	return j.savePrivateIndex()
}

// maxGitFile bounds a .git file and a HEAD the Worker reads.
const maxGitFile = 4096

// attemptGitFile reads the workspace's .git file's gitdir line.
func attemptGitFile(wt string) (string, bool) {
	b, err := readAttemptFile(filepath.Join(wt, ".git"), maxGitFile)
	if err != nil {
		return "", false
	}
	s := string(b)
	const prefix = "gitdir: "
	if len(s) < len(prefix)+2 || s[:len(prefix)] != prefix || s[len(s)-1] != '\n' {
		return "", false
	}
	return s[len(prefix) : len(s)-1], true
}

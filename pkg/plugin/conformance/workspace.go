package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// workspace is a throwaway git repository with one commit, the target of a
// workspace_edit scenario.
type workspace struct {
	dir  string
	head string
	env  []string
}

// gitTimeout bounds each git command the suite runs itself.
const gitTimeout = 30 * time.Second

// newTemplate creates dir as a git repository with one commit, using an
// isolated git configuration (no system or global config, no templates,
// no prompts). Scenario workspaces are copies of it.
func newTemplate(dir, home, path string) (*workspace, error) {
	w := &workspace{dir: dir, env: []string{
		"PATH=" + path,
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
	}}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, errors.New("create workspace directory")
	}
	if _, err := w.git("init", "-q", "--template=", "-b", "main"); err != nil {
		return nil, err
	}
	readme := "# Conformance workspace\n\nA plugin under test may edit this repository.\n"
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o600); err != nil {
		return nil, errors.New("write workspace file")
	}
	if _, err := w.git("add", "-A"); err != nil {
		return nil, err
	}
	if _, err := w.git("-c", "user.name=forge-conformance", "-c", "user.email=conformance@localhost",
		"-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "initial"); err != nil {
		return nil, err
	}
	head, err := w.git("rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	w.head = head
	return w, nil
}

// clone copies the template to dir: a fresh repository at the same commit.
func (w *workspace) clone(dir string) (*workspace, error) {
	if err := copyTree(w.dir, dir); err != nil {
		return nil, errors.New("copy workspace")
	}
	return &workspace{dir: dir, head: w.head, env: w.env}, nil
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.Mkdir(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return errors.New("unexpected file type in the template")
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
}

// git runs one git command in the workspace and returns its trimmed
// stdout. Errors name the git subcommand only.
func (w *workspace) git(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", w.dir}, args...)...)
	cmd.Env = w.env
	out, err := cmd.Output()
	if err != nil {
		sub := args[0]
		if sub == "-c" {
			sub = "commit"
		}
		return "", fmt.Errorf("git %s failed", sub)
	}
	return strings.TrimSpace(string(out)), nil
}

// state reports whether the working tree differs from HEAD (tracked or
// untracked changes) and whether HEAD moved, with one git command.
func (w *workspace) state() (changed, moved bool, err error) {
	status, err := w.git("status", "--porcelain=v2", "--branch", "--untracked-files=all")
	if err != nil {
		return false, false, err
	}
	head := ""
	for _, line := range strings.Split(status, "\n") {
		if oid, ok := strings.CutPrefix(line, "# branch.oid "); ok {
			head = oid
		} else if line != "" && !strings.HasPrefix(line, "# ") {
			changed = true
		}
	}
	return changed, head != w.head, nil
}

// checkAfterSession requires, after a successful edit, a changed working
// tree; and in every case an unmoved HEAD (plugins never commit).
func (w *workspace) checkAfterSession(succeeded bool) error {
	changed, moved, err := w.state()
	if err != nil {
		return fail("inspect workspace: %v", err)
	}
	if moved {
		return fail("the plugin moved HEAD; plugins must not commit")
	}
	if succeeded && !changed {
		return fail("result frame but the workspace shows no change (git status is clean)")
	}
	return nil
}

// checkUntouched requires the workspace to be exactly as created.
func (w *workspace) checkUntouched() error {
	changed, moved, err := w.state()
	if err != nil {
		return fail("inspect workspace: %v", err)
	}
	if changed || moved {
		return fail("an invalid request changed the workspace")
	}
	return nil
}

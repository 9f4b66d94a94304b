package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/github"
)

func TestLoadConfig(t *testing.T) {
	f := newFixture(t)
	cfg, creds, err := LoadConfig(f.config, getenv)
	if err != nil || cfg.Owner != "octo-org" || creds.AppID != "12345" || creds.Key == nil {
		t.Fatalf("load: %v", err)
	}
}

func TestLoadConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, f *fixture)
		code   Code
	}{
		{"missing config", func(t *testing.T, f *fixture) { os.Remove(f.config) }, CodeConfigUnreadable},
		{"world-readable config", func(t *testing.T, f *fixture) { os.Chmod(f.config, 0o644) }, CodeConfigUnsafe},
		{"group-writable config dir", func(t *testing.T, f *fixture) { os.Chmod(filepath.Dir(f.config), 0o770) }, CodeConfigUnsafe},
		{"symlinked config", func(t *testing.T, f *fixture) {
			os.Rename(f.config, f.config+".real")
			os.Symlink(f.config+".real", f.config)
		}, CodeConfigUnsafe},
		{"foreign api_base", func(t *testing.T, f *fixture) { f.writeConfig(t, `"https://api.github.com.evil.example"`) }, CodeAPIBaseRefused},
		{"api_base with slash", func(t *testing.T, f *fixture) { f.writeConfig(t, `"https://api.github.com/"`) }, CodeAPIBaseRefused},
		{"unknown field", func(t *testing.T, f *fixture) {
			b, _ := os.ReadFile(f.config)
			writeFile(t, f.config, strings.Replace(string(b), "{", `{"extra":1,`, 1), 0o600)
		}, CodeConfigInvalid},
		{"world-readable key", func(t *testing.T, f *fixture) { os.Chmod(f.key, 0o644) }, CodeKeyUnsafe},
		{"key not a key", func(t *testing.T, f *fixture) { writeFile(t, f.key, "nope", 0o600) }, CodeKeyInvalid},
		{"group-writable git", func(t *testing.T, f *fixture) { os.Chmod(f.git, 0o775) }, CodeGitUnsafe},
		{"git not executable", func(t *testing.T, f *fixture) { os.Chmod(f.git, 0o644) }, CodeGitUnsafe},
		{"world-writable git dir", func(t *testing.T, f *fixture) { os.Chmod(filepath.Dir(f.git), 0o777) }, CodeGitUnsafe},
		{"world-writable repository", func(t *testing.T, f *fixture) { os.Chmod(f.repo, 0o777) }, CodeRepositoryUnsafe},
		{"repository without .git", func(t *testing.T, f *fixture) {
			os.Rename(filepath.Join(f.repo, ".git"), filepath.Join(f.dir, "moved.git"))
		}, CodeRepositoryUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.mutate(t, f)
			cfg, creds, err := LoadConfig(f.config, getenv)
			if cfg != nil || creds != nil {
				t.Fatal("returned a config")
			}
			wantCode(t, err, tc.code, StageConfig)
			for _, leak := range []string{f.dir, "octo-org", "12345", "BEGIN"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error %q shows %q", err, leak)
				}
			}
		})
	}
	f := newFixture(t)
	if _, _, err := LoadConfig(f.config, func(string) string { return "" }); err == nil {
		t.Fatal("unset App ID accepted")
	} else {
		wantCode(t, err, CodeAppIDInvalid, StageConfig)
	}
}

// The local checks refuse before anything reaches GitHub; a publication
// that passes them goes on to GitHub (here: an offline transport) and
// asks first for the installation.
func TestLocalChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, f *fixture)
		code   Code
	}{
		{"dirty worktree", func(t *testing.T, f *fixture) { writeFile(t, filepath.Join(f.repo, "a.txt"), "edit\n", 0o644) }, CodeWorktreeDirty},
		{"untracked file", func(t *testing.T, f *fixture) { writeFile(t, filepath.Join(f.repo, "new.txt"), "x\n", 0o644) }, CodeWorktreeDirty},
		{"base drift", func(t *testing.T, f *fixture) {
			run(t, f.repo, "commit", "-q", "--allow-empty", "-m", "later")
		}, CodeBaseDrift},
		{"missing base", func(t *testing.T, f *fixture) { f.pub.BaseBranch = "nope" }, CodeBaseDrift},
		{"tree mismatch", func(t *testing.T, f *fixture) { f.pub.ExpectedTreeSHA = strings.Repeat("4", 40) }, CodeTreeMismatch},
		{"candidate mismatch", func(t *testing.T, f *fixture) { f.pub.CandidateSHA = strings.Repeat("5", 40) }, CodeCandidateMismatch},
		{"missing ref", func(t *testing.T, f *fixture) { f.pub.CandidateRef = CandidatePrefix + "job1/other" }, CodeCandidateMismatch},
		{"parent mismatch", func(t *testing.T, f *fixture) {
			// A candidate whose parent is not the base: rebuild it on an
			// unrelated root commit.
			root := run(t, f.repo, "commit-tree", f.pub.ExpectedTreeSHA, "-m", "root")
			cand := run(t, f.repo, "commit-tree", f.pub.ExpectedTreeSHA, "-p", root, "-m", "c")
			run(t, f.repo, "update-ref", f.pub.CandidateRef, cand)
			f.pub.CandidateSHA = cand
		}, CodeParentMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.mutate(t, f)
			tr, err := f.run(t)
			wantCode(t, err, tc.code, StageRefused)
			if len(tr.paths) != 0 {
				t.Fatalf("reached GitHub: %v", tr.paths)
			}
		})
	}
	f := newFixture(t)
	tr, err := f.run(t)
	wantCode(t, err, CodeAPIFailed, StageGitHub)
	if len(tr.paths) == 0 || tr.paths[0] != "api.github.com/repos/octo-org/project/installation" {
		t.Fatalf("requests %v", tr.paths)
	}
	left, _ := filepath.Glob(filepath.Join(f.dir, "forge-github-*"))
	if len(left) != 0 {
		t.Fatalf("private directory left behind: %v", left)
	}
}

func TestChoosePR(t *testing.T) {
	p := &Publication{CandidateSHA: strings.Repeat("c", 40), BaseBranch: "main"}
	open := github.PullRequest{Number: 1, State: "open", HeadSHA: p.CandidateSHA, BaseRef: "main"}
	closed, merged := open, open
	closed.State, merged.State, merged.Merged = "closed", "closed", true
	other := open
	other.HeadSHA = strings.Repeat("d", 40)
	otherBase := open
	otherBase.BaseRef = "dev"
	for name, tc := range map[string]struct {
		prs  []github.PullRequest
		want int
		code Code
	}{
		"none":       {nil, 0, ""},
		"reuse":      {[]github.PullRequest{open}, 1, ""},
		"closed":     {[]github.PullRequest{closed}, 0, CodePRClosed},
		"merged":     {[]github.PullRequest{merged}, 0, CodePRClosed},
		"other head": {[]github.PullRequest{other}, 0, CodePRConflict},
		"other base": {[]github.PullRequest{otherBase}, 0, CodePRConflict},
		"two open":   {[]github.PullRequest{open, open}, 0, CodePRConflict},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := choose(tc.prs, p)
			if tc.code != "" {
				wantCode(t, err, tc.code, StageRefused)
				return
			}
			if err != nil || (got == nil) != (tc.want == 0) || got != nil && got.Number != tc.want {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

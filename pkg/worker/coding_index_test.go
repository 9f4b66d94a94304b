package worker

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// stageWith prepares a worktree, lets agent act on it in place of a
// plugin (with git, which a plugin may run too), and runs workspace
// validation. It returns the staged tree or the validation records.
func stageWith(t *testing.T, f *codingFixture, agent func(j *codingJob)) (string, []evidence.Record) {
	t.Helper()
	x, err := NewCodingExecutor(f.cfg, CodingOptions{LookupEnv: lookupIn(codingEnv)})
	if err != nil {
		t.Fatal(err)
	}
	j := &codingJob{x: x, lease: f.lease(wire.CodingTask{Instruction: "edit"}, nil)}
	ctx := context.Background()
	t.Cleanup(func() {
		if err := j.cleanup(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if _, ok := j.prepare(ctx); !ok {
		t.Fatalf("prepare: %+v", j.records)
	}
	before, err := j.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agent(j)
	tree, _, ok := j.validate(ctx, before)
	if !ok {
		return "", j.records
	}
	return tree, nil
}

func writeT(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func hashObject(t *testing.T, dir, content string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", dir, "hash-object", "-w", "--stdin")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// forgeIndex makes the worktree's index claim rel is unchanged while
// naming the blob of evil: the file is staged as it is (with an old
// mtime, out of git's racy window), then the entry's object id is
// swapped and the index checksum fixed, so its stat data matches the
// file on disk.
func forgeIndex(t *testing.T, wt, rel, evil string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(wt, rel), old, old); err != nil {
		t.Fatal(err)
	}
	gitT(t, wt, "add", "--", rel)
	g, err1 := hex.DecodeString(gitT(t, wt, "rev-parse", ":"+rel))
	e, err2 := hex.DecodeString(hashObject(t, wt, evil))
	if err1 != nil || err2 != nil {
		t.Fatal("object ids")
	}
	p := gitT(t, wt, "rev-parse", "--git-path", "index")
	if !filepath.IsAbs(p) {
		p = filepath.Join(wt, p)
	}
	b, err := os.ReadFile(p)
	if err != nil || bytes.Count(b, g) != 1 {
		t.Fatalf("index: %v", err)
	}
	b = bytes.Replace(b, g, e, 1)
	sum := sha1.Sum(b[:len(b)-sha1.Size])
	copy(b[len(b)-sha1.Size:], sum[:])
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Plain git, trusting this index, would keep the forged blob.
	if got := gitT(t, wt, "diff", "--name-only"); got != "" {
		t.Fatalf("the forged entry does not look clean to git: %q", got)
	}
	if got := gitT(t, wt, "show", ":"+rel); got != strings.TrimSpace(evil) {
		t.Fatalf("forged entry %q", got)
	}
}

// TestStagingIgnoresAgentIndex: whatever the agent writes into the
// worktree's index, the staged tree (the candidate's) holds exactly the
// worktree's files.
// stageThenFlag is an agent that stages EVIL for f.txt, marks the entry
// with flag (so git stops looking at the file) and then writes good.
func stageThenFlag(flag string) func(t *testing.T, wt string) {
	return func(t *testing.T, wt string) {
		writeT(t, filepath.Join(wt, "f.txt"), "EVIL\n")
		gitT(t, wt, "add", "f.txt")
		gitT(t, wt, "update-index", flag, "f.txt")
		writeT(t, filepath.Join(wt, "f.txt"), "good\n")
	}
}

func TestStagingIgnoresAgentIndex(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent func(t *testing.T, wt string)
		want  map[string]string // path → content in the staged tree
	}{
		{"assume-unchanged", stageThenFlag("--assume-unchanged"), map[string]string{"f.txt": "good\n", "README": "demo\n"}},
		{"skip-worktree", stageThenFlag("--skip-worktree"), map[string]string{"f.txt": "good\n", "README": "demo\n"}},
		{"unchanged file staged differently", func(t *testing.T, wt string) {
			sha := hashObject(t, wt, "EVIL\n")
			gitT(t, wt, "update-index", "--cacheinfo", "100644,"+sha+",README")
			gitT(t, wt, "update-index", "--assume-unchanged", "README")
			writeT(t, filepath.Join(wt, "a.txt"), "a\n")
		}, map[string]string{"README": "demo\n", "a.txt": "a\n"}},
		{"forged stat data", func(t *testing.T, wt string) {
			writeT(t, filepath.Join(wt, "f.txt"), "good\n")
			forgeIndex(t, wt, "f.txt", "EVIL\n")
		}, map[string]string{"f.txt": "good\n", "README": "demo\n"}},
		{"forged stat data on a tracked file", func(t *testing.T, wt string) {
			writeT(t, filepath.Join(wt, "README"), "edit\n")
			forgeIndex(t, wt, "README", "demo\n")
		}, map[string]string{"README": "edit\n"}},
		{"deleted from the index only", func(t *testing.T, wt string) {
			gitT(t, wt, "rm", "-q", "--cached", "README")
			writeT(t, filepath.Join(wt, "a.txt"), "a\n")
		}, map[string]string{"README": "demo\n", "a.txt": "a\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCodingFixture(t, "/bin/true")
			tree, recs := stageWith(t, f, func(j *codingJob) { tc.agent(t, j.wt) })
			if tree == "" {
				t.Fatalf("validation failed: %+v", recs)
			}
			files := strings.Fields(gitT(t, f.repo, "ls-tree", "-r", "--name-only", tree))
			if len(files) != len(tc.want) {
				t.Fatalf("staged files %q", files)
			}
			for p, want := range tc.want {
				if got := gitT(t, f.repo, "cat-file", "blob", tree+":"+p) + "\n"; got != want {
					t.Errorf("%s staged as %q, want %q", p, got, want)
				}
			}
		})
	}
}

// TestStagingSeesSameSizeSameMtimeEdit: an edit that keeps the size and
// the modification time is staged (git compares entries not older than
// the index by content; the private index keeps the original's mtime),
// also when the repository's config tells git to check only mtime and
// size.
func TestStagingSeesSameSizeSameMtimeEdit(t *testing.T) {
	for _, trust := range []string{"", "false"} {
		t.Run("trustctime="+trust, func(t *testing.T) {
			f := newCodingFixture(t, "/bin/true")
			if trust != "" {
				gitT(t, f.repo, "config", "core.trustctime", trust)
				gitT(t, f.repo, "config", "core.checkStat", "minimal")
			}
			tree, recs := stageWith(t, f, func(j *codingJob) {
				p := filepath.Join(j.wt, "README")
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				writeT(t, p, "DEMO\n")
				if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			})
			if tree == "" {
				t.Fatalf("validation failed: %+v", recs)
			}
			if got := gitT(t, f.repo, "cat-file", "blob", tree+":README"); got != "DEMO" {
				t.Fatalf("README staged as %q", got)
			}
		})
	}
}

// TestGitNameVariantsArePathEscapes: a path with a .git-like component
// (or another path git refuses to stage) is a terminal path_escape, not
// a retryable git failure.
func TestGitNameVariantsArePathEscapes(t *testing.T) {
	plugin := buildEditPlugin(t)
	for _, instr := range []string{
		"write .Git/x a", "write .git./x a", "write a/.GIT/x a", "write a/.Git a",
		"write GIT~1/x a", "write .git::$INDEX_ALLOCATION/x a", "write ok.txt a\nsymlink .gitmodules ok.txt",
		"write a/ok.txt a\nsymlink a/.GITMODULES. ok.txt",
	} {
		t.Run(instr, func(t *testing.T) {
			f := newCodingFixture(t, plugin)
			r := f.run(f.lease(wire.CodingTask{Instruction: instr}, nil))
			f.expectFailure(r, wire.FailureWorkspaceViolation, evidence.PhaseWorkspaceValidation, evidence.ReasonPathEscape)
		})
	}
	for name, agent := range map[string]func(t *testing.T, wt string){
		"space": func(t *testing.T, wt string) { writeT(t, filepath.Join(wt, ".GIT ", "config"), "x\n") },
		"nested repository without commits": func(t *testing.T, wt string) {
			gitT(t, wt, "init", "-q", "sub")
			writeT(t, filepath.Join(wt, "sub", "y"), "y\n")
		},
		"tracked .gitmodules becomes a symlink": func(t *testing.T, wt string) {
			p := filepath.Join(wt, ".gitmodules")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("README", p); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCodingFixture(t, "/bin/true")
			writeT(t, filepath.Join(f.repo, ".gitmodules"), "")
			gitT(t, f.repo, "add", ".gitmodules")
			gitT(t, f.repo, "commit", "-q", "-m", "modules")
			f.base = gitT(t, f.repo, "rev-parse", "HEAD")
			tree, recs := stageWith(t, f, func(j *codingJob) { agent(t, j.wt) })
			if tree != "" || len(recs) != 1 || recs[0].Reason != evidence.ReasonPathEscape {
				t.Fatalf("tree %q, records %+v", tree, recs)
			}
			if c := codingCode(recs[0].Phase, recs[0].Reason, codeCodingTerminal); c != wire.FailureWorkspaceViolation {
				t.Fatalf("code %s", c)
			}
		})
	}
}

func TestGitNames(t *testing.T) {
	for c, want := range map[string]bool{
		".git": true, ".GIT": true, ".git.": true, ".git ": true, ".git. .": true, "git~1": true, "GIT~1..": true,
		".git:x": true, ".git::$INDEX_ALLOCATION": true,
		".gitignore": false, "git": false, ".gi": false, "git~2": false, "a.git": false, "x:.git": false,
	} {
		if got := isGitName(c); got != want {
			t.Errorf("isGitName(%q) = %v", c, got)
		}
	}
	for c, want := range map[string]bool{".gitmodules": true, ".GITMODULES. ": true, ".gitmodules:s": true, ".gitmodule": false} {
		if got := isGitModulesName(c); got != want {
			t.Errorf("isGitModulesName(%q) = %v", c, got)
		}
	}
}

// TestStagingConfigPinned: the settings under which a stat match means
// "unchanged" reach git over the repository's own config.
func TestStagingConfigPinned(t *testing.T) {
	f := newCodingFixture(t, "/bin/true")
	repoSet := map[string]string{"core.trustctime": "true", "core.checkStat": "minimal", "core.ignoreStat": "true",
		"core.sparseCheckout": "true", "core.splitIndex": "true", "core.untrackedCache": "true", "index.sparse": "true"}
	for k, v := range repoSet {
		gitT(t, f.repo, "config", k, v)
	}
	stageWith(t, f, func(j *codingJob) {
		for k, v := range repoSet {
			out, err := j.git.Run(context.Background(), j.stagingCmd("config", "--get", k))
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if got := strings.TrimSpace(string(out)); got == v {
				t.Errorf("%s = %s: the repository's value reaches staging", k, got)
			}
		}
		if _, err := os.Stat(j.privateIndex()); err != nil {
			t.Errorf("private index: %v", err)
		}
		writeT(t, filepath.Join(j.wt, "a.txt"), "a\n")
	})
}

// The mirror lists as changed what the agent touched since the private
// index was saved and (all but the files the checkout wrote in the
// clock tick the index was saved in) nothing else, so git reads only
// those; whatever way a tracked file's content changed while its size
// and modification time stayed, it is staged: written in place, deleted
// and made again, another tracked file renamed over it (the private
// index is dated after the files: git's racy-entry rule compares none
// of them by content, only the listing makes it read them).
func TestStagingReadsOnlyChangedFiles(t *testing.T) {
	f := newCodingFixture(t, "/bin/true")
	for i := range 40 {
		writeT(t, filepath.Join(f.repo, "d", fmt.Sprintf("f%02d.txt", i)), fmt.Sprintf("file %02d\n", i))
	}
	gitT(t, f.repo, "add", "-A")
	gitT(t, f.repo, "commit", "-q", "-m", "files")
	f.base = gitT(t, f.repo, "rev-parse", "HEAD")
	var changed []string
	tree, recs := stageWith(t, f, func(j *codingJob) {
		keep := func(p string, edit func()) {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			edit()
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
		d := filepath.Join(j.wt, "d")
		keep(filepath.Join(d, "f00.txt"), func() { writeT(t, filepath.Join(d, "f00.txt"), "FILE 00\n") })
		keep(filepath.Join(d, "f01.txt"), func() {
			os.Remove(filepath.Join(d, "f01.txt"))
			writeT(t, filepath.Join(d, "f01.txt"), "FILE 01\n")
		})
		keep(filepath.Join(d, "f03.txt"), func() {
			if err := os.Rename(filepath.Join(d, "f02.txt"), filepath.Join(d, "f03.txt")); err != nil {
				t.Fatal(err)
			}
		})
		m, err := j.mirror()
		if err != nil {
			t.Fatal(err)
		}
		changed = m.changed
		j.dropMirror()
	})
	if tree == "" {
		t.Fatalf("validation failed: %+v", recs)
	}
	for p, want := range map[string]string{"d/f00.txt": "FILE 00", "d/f01.txt": "FILE 01", "d/f03.txt": "file 02", "d/f04.txt": "file 04"} {
		if got := gitT(t, f.repo, "cat-file", "blob", tree+":"+p); got != want {
			t.Errorf("%s staged as %q, want %q", p, got, want)
		}
	}
	if out := gitT(t, f.repo, "ls-tree", "--name-only", tree, "d/f02.txt"); out != "" {
		t.Errorf("d/f02.txt (renamed away) is still staged")
	}
	for _, p := range []string{"d/f00.txt", "d/f01.txt", "d/f03.txt"} {
		if !slices.Contains(changed, p) {
			t.Errorf("%s is not listed as changed: %v", p, changed)
		}
	}
	if len(changed) > 20 {
		t.Errorf("%d of 41 files listed as changed: %v", len(changed), changed)
	}
}

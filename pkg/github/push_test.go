package github

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// git ls-remote matches a pattern against the tail of every ref, so a
// legal branch such as a/refs/heads/<branch> is listed beside (or
// instead of) refs/heads/<branch>; only the exact name may count.
func TestParseRemoteBranchExactNameOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "r")
	gitT(t, dir, "init", "-q", "-b", "main", repo)
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "one")
	one := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "two")
	two := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	gitT(t, repo, "branch", "a/refs/heads/forge/job-1", one)
	ref := "refs/heads/forge/job-1"
	list := func() []byte {
		return []byte(gitT(t, dir, "ls-remote", "--refs", "--", "file://"+repo, ref))
	}

	out := list()
	if !strings.Contains(string(out), "refs/heads/a/refs/heads/forge/job-1") {
		t.Fatalf("git no longer tail-matches: %q", out)
	}
	if sha, ok, err := parseRemoteBranch(out, ref); err != nil || ok || sha != "" {
		t.Fatalf("only a look-alike exists: %q %v %v", sha, ok, err)
	}
	gitT(t, repo, "branch", "forge/job-1", two)
	if sha, ok, err := parseRemoteBranch(list(), ref); err != nil || !ok || sha != two {
		t.Fatalf("both exist: %q %v %v", sha, ok, err)
	}
	if _, ok, err := parseRemoteBranch(nil, ref); err != nil || ok {
		t.Fatalf("empty: %v %v", ok, err)
	}
	for _, bad := range []string{"zz\t" + ref + "\n", two + " " + ref + "\n", two + "\t" + ref + "\n" + one + "\t" + ref + "\n"} {
		if _, _, err := parseRemoteBranch([]byte(bad), ref); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
}

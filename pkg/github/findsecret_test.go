package github

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

// FindSecret scans the commit object (message, identities) as well as
// the paths and blobs it adds: a secret only in the message is found,
// with no path.
func TestFindSecretScansCommitAndChange(t *testing.T) {
	const secret = "owner-token-for-find-secret-0001"
	set, err := secretscan.New([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	base := strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
	commit := func(file, content, msg string) string {
		gitT(t, dir, "checkout", "-q", "--detach", base)
		os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644)
		gitT(t, dir, "add", "-A")
		gitT(t, dir, "commit", "-q", "-m", msg)
		return strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
	}
	r := testRunner(t)
	gitDir := filepath.Join(dir, ".git")
	for _, tc := range []struct {
		name, file, content, msg, path string
		found                          bool
	}{
		{"clean", "b.txt", "b\n", "add b", "", false},
		{"in a file", "c.txt", "x" + secret + "\n", "add c", "c.txt", true},
		{"in the message", "d.txt", "d\n", "fix: " + secret, "", true},
	} {
		sha := commit(tc.file, tc.content, tc.msg)
		path, found, err := FindSecret(context.Background(), r, gitDir, base, sha, set)
		if err != nil || found != tc.found || path != tc.path {
			t.Errorf("%s: %q %v %v", tc.name, path, found, err)
		}
	}
}

package publish

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixture is a private directory with an owned git copy, a worktree whose
// main branch has one commit and a candidate ref one commit ahead, the
// App key and github.json.
type fixture struct {
	dir, git, repo, key, config string
	pub                         Publication
}

func run(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(tb testing.TB, path, data string, mode os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	dir, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	os.Chmod(dir, 0o700)
	f := &fixture{dir: dir}
	sys, err := exec.LookPath("git")
	if err != nil {
		tb.Fatal("git is required")
	}
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	f.git = filepath.Join(dir, "bin", "git")
	src, err := os.ReadFile(sys)
	if err != nil {
		tb.Fatal(err)
	}
	writeFile(tb, f.git, string(src), 0o755)

	f.repo = filepath.Join(dir, "repo")
	os.Mkdir(f.repo, 0o755)
	run(tb, f.repo, "init", "-q", "-b", "main")
	writeFile(tb, filepath.Join(f.repo, "a.txt"), "base\n", 0o644)
	run(tb, f.repo, "add", "a.txt")
	run(tb, f.repo, "commit", "-q", "-m", "base")
	parent := run(tb, f.repo, "rev-parse", "HEAD")
	writeFile(tb, filepath.Join(f.repo, "a.txt"), "candidate\n", 0o644)
	run(tb, f.repo, "add", "a.txt")
	tree := run(tb, f.repo, "write-tree")
	cand := run(tb, f.repo, "commit-tree", tree, "-p", parent, "-m", "candidate")
	run(tb, f.repo, "reset", "-q", "--hard", "main")
	ref := CandidatePrefix + "job1/att1"
	run(tb, f.repo, "update-ref", ref, cand)

	secrets := filepath.Join(dir, "secrets")
	os.Mkdir(secrets, 0o700)
	pem, err := os.ReadFile("../github/testdata/app-key-pkcs1.pem")
	if err != nil {
		tb.Fatal(err)
	}
	f.key = filepath.Join(secrets, "app.pem")
	writeFile(tb, f.key, string(pem), 0o600)
	f.config = filepath.Join(secrets, "github.json")
	f.writeConfig(tb, `"https://api.github.com"`)
	f.pub = Publication{Version: 1, CandidateSHA: cand, ExpectedParentSHA: parent, ExpectedTreeSHA: tree,
		CandidateRef: ref, BaseBranch: "main", NewBranch: "forge/job-1", PRTitle: "t", PRBody: "b"}
	return f
}

func (f *fixture) writeConfig(tb testing.TB, apiBase string) {
	writeFile(tb, f.config, `{"version":1,"api_base":`+apiBase+`,"owner":"octo-org","repository":"project",`+
		`"local_repository":"`+f.repo+`","git_executable":"`+f.git+`","github_app_id_env":"FORGE_GITHUB_APP_ID",`+
		`"github_app_private_key_path":"`+f.key+`"}`, 0o600)
}

func getenv(name string) string {
	if name == "FORGE_GITHUB_APP_ID" {
		return "12345"
	}
	return ""
}

// refuseTransport stands in for GitHub: every request fails, and the
// paths asked for are recorded.
type refuseTransport struct{ paths []string }

func (t *refuseTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.paths = append(t.paths, r.URL.Host+r.URL.Path)
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
	}
	return nil, errors.New("offline")
}

func (f *fixture) run(tb testing.TB) (*refuseTransport, error) {
	tb.Helper()
	cfg, creds, err := LoadConfig(f.config, getenv)
	if err != nil {
		tb.Fatalf("load: %v", err)
	}
	tr := &refuseTransport{}
	sleep := func(context.Context, time.Duration) error { return nil }
	_, err = New(cfg, creds, Env{Transport: tr, Sleep: sleep, TempDir: f.dir}).Run(context.Background(), &f.pub)
	return tr, err
}

func wantCode(tb testing.TB, err error, code Code, stage Stage) {
	tb.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code || e.Stage != stage {
		tb.Fatalf("got %v, want %s (stage %d)", err, code, stage)
	}
}

//go:build unix

package github

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

func testRunner(t *testing.T) *gitx.Runner {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return &gitx.Runner{Git: git, Home: home}
}

// git's credential helper receives the token from the FIFO, every time
// git asks, while neither the argv nor the environment of git holds it;
// Close removes the FIFO.
func TestCredentialReachesGitOnlyThroughTheFIFO(t *testing.T) {
	r := testRunner(t)
	dir := t.TempDir()
	const secret = "ghs_credentialtestvalue0123456789abcdef"
	cs, err := serveCredential(dir, []byte("username=x-access-token\npassword="+secret+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := gitx.Cmd{CredentialHelper: credentialHelper(cs.path), Stdin: []byte("protocol=https\nhost=github.com\n\n"),
		Args: []string{"credential", "fill"}}
	if strings.Contains(strings.Join(r.Argv(cmd), " "), secret) || strings.Contains(strings.Join(append(r.Env(), cmd.Env...), " "), secret) {
		t.Fatal("the token is in git's argv or environment")
	}
	for i := 0; i < 2; i++ {
		out, err := r.Run(context.Background(), cmd)
		if err != nil || !strings.Contains(string(out), "password="+secret+"\n") || !strings.Contains(string(out), "username=x-access-token\n") {
			t.Fatalf("fill %d: %q %v", i, out, err)
		}
	}
	cs.Close()
	if _, err := os.Lstat(cs.path); !os.IsNotExist(err) {
		t.Fatalf("FIFO left behind: %v", err)
	}
	// A path with a quote stays one shell word.
	if h := credentialHelper("/tmp/a'b"); !strings.Contains(h, `'/tmp/a'\''b'`) {
		t.Fatalf("helper %q", h)
	}
}

// GitHub's refusals in a push's output: the workflows refusal, a stale
// lease, and branch protection or rulesets (GH006, GH013, "[remote
// rejected] … declined"), which are final.
func TestPushRefusalClassesGitHubOutput(t *testing.T) {
	r := testRunner(t)
	for _, tc := range []struct {
		out  string
		want error
	}{
		{"remote: error: GH013: Repository rule violations found for refs/heads/forge/job-1.\n! refs/heads/forge/job-1:refs/heads/forge/job-1 [remote rejected] (push declined due to repository rule violations)", ErrPushRejected},
		{"remote: error: GH006: Protected branch update failed for refs/heads/forge/job-1.\n! x:y [remote rejected] (protected branch hook declined)", ErrPushRejected},
		{"! x:y [remote rejected] (pre-receive hook declined)", ErrPushRejected},
		{"! x:y [remote rejected] (refusing to allow a GitHub App to create or update workflow `.github/workflows/a.yml` without `workflows` permission)", ErrWorkflowsRefused},
		{"! x:y [rejected] (stale info)", ErrBranchConflict},
		{"fatal: unable to access 'https://github.com/o/r.git/': The requested URL returned error: 502", ErrPushFailed},
	} {
		_, err := r.Run(context.Background(), gitx.Cmd{
			Env:  configEnv("alias.fail", "!f() { printf '%s\\n' \"$1\" >&2; exit 1; }; f"),
			Args: []string{"fail", tc.out}})
		if err == nil {
			t.Fatal("alias did not fail")
		}
		if got := pushRefusal(err); !errors.Is(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.out, got, tc.want)
		}
	}
}

// WorkflowsChanged asks git only about .github/workflows: a candidate
// touching thousands of paths does not meet a small output bound.
func TestWorkflowsChangedIgnoresTheOutputBound(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "r")
	gitT(t, dir, "init", "-q", "-b", "main", repo)
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "base")
	base := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	for i := 0; i < 3000; i++ {
		if err := os.WriteFile(filepath.Join(repo, "file-with-a-long-name-"+strconv.Itoa(i)+".txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, repo, "add", ".")
	gitT(t, repo, "commit", "-q", "-m", "many")
	many := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	if err := os.MkdirAll(filepath.Join(repo, ".github", "workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".github", "workflows", "ci.yml"), []byte("on: push\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "add", ".")
	gitT(t, repo, "commit", "-q", "-m", "wf")
	wf := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	r := testRunner(t)
	r.OutputBytes = 4096
	gitDir := filepath.Join(repo, ".git")
	if yes, err := WorkflowsChanged(context.Background(), r, gitDir, base, many); err != nil || yes {
		t.Fatalf("many paths: %v %v", yes, err)
	}
	if yes, err := WorkflowsChanged(context.Background(), r, gitDir, many, wf); err != nil || !yes {
		t.Fatalf("workflow change: %v %v", yes, err)
	}
}

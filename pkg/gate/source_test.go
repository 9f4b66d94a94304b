package gate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// publicGate starts a Gate whose repository agent-forge is the public
// source testPublicURL. Its git is the real one, told to read
// https://github.com/ from a local directory instead (the Gate cannot
// tell); fail makes every fetch fail as a server asking for credentials.
// It returns the Gate, the upstream work tree and its first commit.
func publicGate(t *testing.T, fail bool, more ...func(map[string]any)) (*testGate, string, string) {
	t.Helper()
	return publicGateSetup(t, fail, nil, more...)
}

// publicGateSetup is publicGate with setup applied to the Gate before it
// serves (nil: none).
func publicGateSetup(t *testing.T, fail bool, setup func(*Gate), more ...func(map[string]any)) (*testGate, string, string) {
	t.Helper()
	sysGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "public")
	up := filepath.Join(dir, "up")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	// Upstream as <dir>/up/octo-org/hello.git.
	work := filepath.Join(dir, "work")
	runGit(t, dir, "init", "-q", "-b", "main", work)
	runGit(t, work, "commit", "-q", "--allow-empty", "-m", "first")
	first := runGit(t, work, "rev-parse", "HEAD")
	runGit(t, dir, "init", "-q", "--bare", filepath.Join(up, "octo-org", "hello.git"))
	runGit(t, work, "push", "-q", filepath.Join(up, "octo-org", "hello.git"), "main")
	script := "#!/bin/sh\nexec '" + sysGit + "' -c url.file://" + up + "/.insteadOf=https://github.com/ -c protocol.file.allow=always \"$@\"\n"
	if fail {
		script = "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = fetch ] && { echo \"fatal: could not read Username for 'https://github.com': terminal prompts disabled\" >&2; exit 128; }; done\nexec '" + sysGit + "' \"$@\"\n"
	}
	wrapper := filepath.Join(dir, "git")
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, sec := testConfig(t, func(m map[string]any) {
		m["public_repository_root"] = root
		m["git_executable"] = wrapper
		repo0(m)["repository_url"] = testPublicURL
		for _, f := range more {
			f(m)
		}
	})
	clk := newClock()
	tg := startGateSetup(t, cfg, sec, "", clk.Now, io.Discard, setup)
	tg.clock = clk
	return tg, work, first
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (tg *testGate) jobCount() int {
	tg.t.Helper()
	jobs, err := tg.st.DebugJobs(context.Background(), "", 100)
	if err != nil {
		tg.t.Fatal(err)
	}
	return len(jobs)
}

// A public-source submit prepares the bare repository before the job
// exists, and the lease carries the checked base and no path.
func TestSubmitPublicSourceLeasesBase(t *testing.T) {
	tg, _, first := publicGate(t, false)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + first + `","instruction":"Fix it."}`)
	l := w.lease()
	want := filepath.Join(tg.cfg.PublicRepositoryRoot, source.DirName(testPublicURL))
	if l.JobID != job.ID || l.BaseSHA != first || l.DefaultBranch != "main" {
		t.Fatalf("lease %+v", l)
	}
	if got := runGit(t, want, "rev-parse", "refs/heads/main"); got != first {
		t.Fatalf("prepared main %s", got)
	}
}

// Preparation failures answer source_failed with phase, reason and
// retryable, name no path and create no job.
func TestSubmitPublicSourceRefusals(t *testing.T) {
	unknown := strings.Repeat("0", 40)
	t.Run("unknown base", func(t *testing.T) {
		tg, _, _ := publicGate(t, false)
		code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"repository_id":"agent-forge","base_sha":"`+unknown+`","instruction":"x"}`))
		wantSourceFailed(t, tg, code, body, http.StatusUnprocessableEntity, "base", "base_missing", false)
	})
	t.Run("credentials asked", func(t *testing.T) {
		tg, _, first := publicGate(t, true)
		code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"repository_id":"agent-forge","base_sha":"`+first+`","instruction":"x"}`))
		wantSourceFailed(t, tg, code, body, http.StatusBadGateway, "clone", "credentials_required", false)
	})
}

func wantSourceFailed(t *testing.T, tg *testGate, code int, body []byte, status int, phase, reason string, retryable bool) {
	t.Helper()
	var b struct {
		Error struct {
			Code, Message, Phase, Reason string
			Retryable                    *bool
		}
	}
	if err := json.Unmarshal(body, &b); err != nil || code != status {
		t.Fatalf("%d %s", code, body)
	}
	if b.Error.Code != "source_failed" || b.Error.Phase != phase || b.Error.Reason != reason ||
		b.Error.Retryable == nil || *b.Error.Retryable != retryable || b.Error.Message == "" {
		t.Fatalf("body %s", body)
	}
	if strings.Contains(string(body), "/") || strings.Contains(string(body), "octo-org") {
		t.Fatalf("body names a path or URL: %s", body)
	}
	if n := tg.jobCount(); n != 0 {
		t.Fatalf("%d jobs after a refused submit", n)
	}
}

func TestLeaseSource(t *testing.T) {
	prepared := "/srv/p/" + source.DirName(testPublicURL)
	sha := strings.Repeat("a", 40)
	l := &wire.Lease{Kind: wire.KindCoding, Task: json.RawMessage(`{"repository_id":"a","base_sha":"` + sha + `","instruction":"x"}`)}
	leaseSource(prepared, sha, l)
	if l.BaseSHA != sha {
		t.Fatalf("lease %+v", l)
	}
	static := &wire.Lease{Kind: wire.KindCoding, Task: l.Task}
	leaseSource("", sha, static)
	if static.BaseSHA != "" {
		t.Fatalf("static lease %+v", static)
	}
}

// A job prepared at submit stays a public-source job whatever the
// configuration says when it is leased (the job keeps its prepared
// repository, like its policy).
func TestPublicLeaseKeepsSubmitSource(t *testing.T) {
	tg, _, first := publicGate(t, false)
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + first + `","instruction":"Fix it."}`)
	tg.cfg.Repositories[0].RepositoryURL = "" // the configuration no longer names a public source
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	if l := w.lease(); l.JobID != job.ID || l.BaseSHA != first {
		t.Fatalf("lease %+v", l)
	}
}

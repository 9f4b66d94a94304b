package githubfake

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type fixture struct {
	srv     *Server
	root    string
	port    string
	caFile  string
	logPath string
	home    string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if err := WritePKI(pki, time.Now()); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, CertFile), filepath.Join(pki, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{root: filepath.Join(dir, "repos"), caFile: filepath.Join(pki, CAFile), logPath: filepath.Join(dir, "requests.log"), home: filepath.Join(dir, "home")}
	for _, d := range []string{f.root, f.home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	reqLog, err := OpenLog(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reqLog.Close() })
	f.srv = New(f.root, git, reqLog)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: f.srv}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	_, f.port, _ = net.SplitHostPort(ln.Addr().String())
	return f
}

// git runs git as a client that resolves github.com to the fixture and
// trusts its CA, with no user or system config and no prompts.
func (f *fixture) git(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"-c", "http.curloptResolve=github.com:" + f.port + ":127.0.0.1", "-c", "http.followRedirects=false", "-c", "protocol.allow=always"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false", "GIT_SSL_CAINFO=" + f.caFile,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (f *fixture) url(repo string) string {
	return "https://github.com:" + f.port + "/" + repo + ".git"
}

// seed makes <root>/o/r.git with one commit on main and returns its SHA.
func (f *fixture) seed(t testing.TB, repo string) string {
	t.Helper()
	work := t.TempDir()
	mustGit := func(dir string, args ...string) string {
		out, err := f.git(t, dir, args...)
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(out)
	}
	mustGit(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(work, "add", "README")
	mustGit(work, "commit", "-q", "-m", "first")
	bare := filepath.Join(f.root, repo+".git")
	mustGit(work, "clone", "-q", "--bare", work, bare)
	return mustGit(work, "rev-parse", "HEAD")
}

func TestCloneThroughRealHTTPBackend(t *testing.T) {
	f := newFixture(t)
	sha := f.seed(t, "octo/app")
	dst := filepath.Join(t.TempDir(), "clone")
	if out, err := f.git(t, "", "clone", "-q", f.url("octo/app"), dst); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	got, err := f.git(t, dst, "rev-parse", "HEAD")
	if err != nil || strings.TrimSpace(got) != sha {
		t.Fatalf("cloned HEAD = %q (%v), want %s", got, err, sha)
	}
	entries := readLog(t, f.logPath)
	if len(entries) < 2 || entries[0].Host != GitHost || entries[0].Path != "/octo/app.git/info/refs" || entries[0].Status != 200 {
		t.Fatalf("request log = %+v", entries)
	}
}

func TestFaultsAndRefusals(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "octo/app")
	cases := []struct {
		name, repo, fault, want string
	}{
		{"unknown repository asks for credentials", "octo/missing", "", "could not read Username"},
		{"redirect is not followed", "octo/app", FaultRedirect, "error: 301"},
		{"credentials asked, no prompt", "octo/app", FaultAuth, "could not read Username"},
		{"server error", "octo/app", FaultError, "500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := f.srv.SetFault(c.repo, c.fault); err != nil {
				t.Fatal(err)
			}
			defer f.srv.SetFault(c.repo, FaultNone)
			out, err := f.git(t, "", "ls-remote", f.url(c.repo))
			if err == nil || !strings.Contains(out, c.want) {
				t.Fatalf("ls-remote err=%v, output %q lacks %q", err, out, c.want)
			}
		})
	}
	if err := f.srv.SetFault("octo/app", "bogus"); err == nil {
		t.Fatal("unknown fault mode accepted")
	}
}

func TestPushNeedsAuth(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "octo/app")
	work := filepath.Join(t.TempDir(), "w")
	if out, err := f.git(t, "", "clone", "-q", f.url("octo/app"), work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if out, err := f.git(t, work, "commit", "-q", "--allow-empty", "-m", "second"); err != nil {
		t.Fatalf("commit: %v\n%s", err, out)
	}
	if out, err := f.git(t, work, "push", "-q", "origin", "HEAD:refs/heads/feature"); err == nil {
		t.Fatalf("anonymous push accepted: %s", out)
	}
	f.srv.Auth = func(r *http.Request, owner, repo string, push bool) int {
		if _, pass, ok := r.BasicAuth(); push && (!ok || pass != "sekrit") {
			return http.StatusUnauthorized
		}
		return 0
	}
	header := "http.extraHeader=Authorization: Basic eC1hY2Nlc3MtdG9rZW46c2Vrcml0" // x-access-token:sekrit
	if out, err := f.git(t, work, "-c", header, "push", "-q", "origin", "HEAD:refs/heads/feature"); err != nil {
		t.Fatalf("authorized push: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "sekrit") || strings.Contains(string(raw), "eC1hY2Nlc3MtdG9rZW46c2Vrcml0") {
		t.Fatal("request log holds the credential")
	}
}

func TestAPIHostWithoutHandlerIsNotFound(t *testing.T) {
	f := newFixture(t)
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(f.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+f.port)
		},
	}
	resp, err := (&http.Client{Transport: tr}).Get("https://api.github.com/repos/o/r")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 404 || body["message"] != "Not Found" {
		t.Fatalf("status %d body %v", resp.StatusCode, body)
	}
}

func readLog(t *testing.T, path string) []LogEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []LogEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e LogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

package gitx

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

func mustRunner(tb testing.TB) *Runner {
	tb.Helper()
	git, err := Find(os.Getenv("PATH"))
	if err != nil {
		tb.Fatalf("find git: %v", err)
	}
	return &Runner{Git: git, Home: tb.TempDir()}
}

// mustRepo makes a repository with one commit using the isolated runner.
func mustRepo(tb testing.TB, r *Runner) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "repo")
	ctx := context.Background()
	if _, err := r.Run(ctx, Cmd{Args: []string{"init", "-q", "-b", "main", dir}}); err != nil {
		tb.Fatalf("init: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	id := []string{"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	if _, err := r.Run(ctx, Cmd{Dir: dir, Args: []string{"add", "-A"}}); err != nil {
		tb.Fatalf("add: %v", err)
	}
	if _, err := r.Run(ctx, Cmd{Dir: dir, Env: id, Args: []string{"commit", "-q", "-m", "init"}}); err != nil {
		tb.Fatalf("commit: %v", err)
	}
	return dir
}

func TestHooksDoNotRun(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	marker := filepath.Join(t.TempDir(), "hook-ran")
	hook := "#!/bin/sh\ntouch " + marker + "\n"
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout"} {
		if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", h), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A hooksPath in the repository's own config is overridden too.
	if err := exec.Command("git", "-C", dir, "config", "core.hooksPath", filepath.Join(dir, ".git", "hooks")).Run(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	ctx := context.Background()
	id := []string{"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	if _, err := r.Run(ctx, Cmd{Dir: dir, Args: []string{"add", "-A"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, Cmd{Dir: dir, Env: id, Args: []string{"commit", "-q", "-m", "two"}}); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	if _, err := r.Run(ctx, Cmd{Dir: dir, Args: []string{"worktree", "add", "--detach", wt, "HEAD"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook ran")
	}
}

func TestGlobalAndUserConfigIgnored(t *testing.T) {
	r := mustRunner(t)
	os.WriteFile(filepath.Join(r.Home, ".gitconfig"), []byte("[user]\n\tname = Leaky\n"), 0o644)
	os.MkdirAll(filepath.Join(r.Home, "git"), 0o700)
	os.WriteFile(filepath.Join(r.Home, "git", "config"), []byte("[user]\n\tname = Leaky\n"), 0o644)
	_, err := r.Run(context.Background(), Cmd{Args: []string{"config", "--get", "user.name"}})
	if code, ok := ExitCode(err); !ok || code != 1 {
		t.Fatalf("user.name from a global file must be invisible: %v", err)
	}
}

func TestNoTransport(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	_, err := r.Run(context.Background(), Cmd{Args: []string{"ls-remote", "file://" + dir}})
	if err == nil {
		t.Fatal("ls-remote over file:// succeeded with protocol.allow=never")
	}
	if strings.Contains(err.Error(), dir) {
		t.Fatalf("error leaks a path: %v", err)
	}
}

func TestErrorsAreValueFree(t *testing.T) {
	r := mustRunner(t)
	secret := "/tmp/secret-path-value"
	_, err := r.Run(context.Background(), Cmd{Args: []string{"rev-parse", "--verify", "-q", secret + "^{commit}"}, GitDir: secret})
	if err == nil {
		t.Fatal("rev-parse in a missing git dir succeeded")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error leaks a value: %v", err)
	}
	_, err = r.Run(context.Background(), Cmd{Args: []string{secret}})
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "git command:") {
		t.Fatalf("unknown subcommand error: %v", err)
	}
}

func TestOutputLimit(t *testing.T) {
	r := mustRunner(t)
	r.OutputBytes = 4
	_, err := r.Run(context.Background(), Cmd{Args: []string{"version"}})
	var e *Error
	if err == nil || !asError(err, &e) || e.Reason != "output limit" {
		t.Fatalf("want output limit, got %v", err)
	}
}

func TestLineAndStdin(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	head, err := r.Line(context.Background(), Cmd{Dir: dir, Args: []string{"rev-parse", "HEAD"}})
	if err != nil || !ident.ValidSHA(head) {
		t.Fatalf("rev-parse: %q %v", head, err)
	}
	out, err := r.Run(context.Background(), Cmd{Dir: dir, Stdin: []byte(head + "\n"), Args: []string{"cat-file", "--batch-check"}})
	if err != nil || !strings.HasPrefix(string(out), head+" commit ") {
		t.Fatalf("cat-file: %q %v", out, err)
	}
}

func TestFind(t *testing.T) {
	if _, err := Find("relative/dir:"); err == nil {
		t.Fatal("found git on a PATH without absolute directories")
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	if ok {
		*e = x
	}
	return ok
}

func TestClassifyTransport(t *testing.T) {
	for stderr, want := range map[string]string{
		"fatal: unable to access 'https://github.com/o/SSL.git/': The requested URL returned error: 301\n":                                               TransportRedirect,
		"error: unable to read askpass response from '/bin/false'\nfatal: could not read Username for 'https://github.com': terminal prompts disabled\n": TransportCredentials,
		"fatal: unable to access 'https://github.com/o/r.git/': The requested URL returned error: 403\n":                                                 TransportCredentials,
		"fatal: repository 'https://github.com/o/r.git/' not found\n":                                                                                    TransportNotFound,
		"fatal: couldn't find remote ref refs/heads/main\n":                                                                                              TransportRefMissing,
		"fatal: unable to access 'https://github.com/o/r.git/': The requested URL returned error: 502\n":                                                 TransportServerError,
		"fatal: unable to access 'https://github.com/o/SSL.git/': Failed to connect to github.com port 443 after 0 ms\n":                                 TransportUnreachable,
		"fatal: unable to access 'https://github.com/o/r.git/': Could not resolve host: github.com\n":                                                    TransportUnreachable,
		"fatal: unable to access 'https://github.com/o/r.git/': server certificate verification failed. CAfile: x\n":                                     TransportTLS,
		"fatal: the remote end hung up unexpectedly\n":                                                                                                   TransportOtherFailure,
		"": TransportOtherFailure,
		// Local failures of an HTTPS command are not the remote's.
		"error: cannot lock ref 'refs/heads/main': Unable to create '/srv/p/x.git/./refs/heads/main.lock': File exists.\n": "",
		"fatal: write error: No space left on device\nfatal: index-pack failed\n":                                          "",
		"error: unable to write file objects/pack/tmp_pack_x: Read-only file system\n":                                     "",
		"fatal: Unable to create temporary file '/srv/p/x.git/objects/pack/tmp_pack_XXXXXX': Permission denied\n":          "",
	} {
		if got := classifyTransport([]byte(stderr)); got != want {
			t.Errorf("classifyTransport(%q) = %q, want %q", stderr, got, want)
		}
	}
}

// HTTPS opens https alone: a file:// fetch with HTTPS set still fails.
func TestHTTPSOpensOnlyHTTPS(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	argv := strings.Join(r.Argv(Cmd{HTTPS: true, Args: []string{"fetch"}}), " ")
	if !strings.Contains(argv, "-c protocol.https.allow=always -c http.followRedirects=false") || !strings.Contains(argv, "protocol.allow=never") {
		t.Fatalf("argv %s", argv)
	}
	if strings.Contains(strings.Join(r.Argv(Cmd{Args: []string{"fetch"}}), " "), "protocol.https") {
		t.Fatal("https is open without Cmd.HTTPS")
	}
	_, err := r.Run(context.Background(), Cmd{HTTPS: true, Args: []string{"ls-remote", "file://" + dir}})
	var e *Error
	if err == nil || !asError(err, &e) || e.Transport == "" {
		t.Fatalf("file:// with HTTPS: %v", err)
	}
}

// A graft file (deprecated, but still read by git) never rewrites history
// for the runner: a commit grafted as a root keeps its parent.
func TestGraftsIgnored(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	ctx := context.Background()
	id := []string{"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	if _, err := r.Run(ctx, Cmd{Dir: dir, Env: id, Args: []string{"commit", "-q", "--allow-empty", "-m", "second"}}); err != nil {
		t.Fatal(err)
	}
	tip, err := r.Line(ctx, Cmd{Dir: dir, Args: []string{"rev-parse", "HEAD"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "grafts"), []byte(tip+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(ctx, Cmd{Dir: dir, Args: []string{"rev-list", "--count", "HEAD"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "2\n" {
		t.Fatalf("rev-list --count with a graft file: %q, want 2", out)
	}
}

// TestStream: output past Runner.OutputBytes streams through read within
// Stream's own limit; read's error stops git and is returned; the limit
// still holds.
func TestStream(t *testing.T) {
	r := mustRunner(t)
	dir := mustRepo(t, r)
	r.OutputBytes = 8
	ctx := context.Background()
	c := Cmd{Dir: dir, Stdin: []byte("HEAD:a.txt\nHEAD\n"), Args: []string{"cat-file", "--batch"}}
	var got []byte
	err := r.Stream(ctx, c, 1<<20, func(rd io.Reader) error {
		b, err := io.ReadAll(rd)
		got = b
		return err
	})
	if err != nil || !strings.Contains(string(got), " blob 2\na\n\n") || !strings.Contains(string(got), " commit ") {
		t.Fatalf("stream: %q %v", got, err)
	}
	stop := errors.New("enough")
	if err := r.Stream(ctx, c, 1<<20, func(io.Reader) error { return stop }); err != stop {
		t.Fatalf("early stop: %v", err)
	}
	err = r.Stream(ctx, c, 16, func(rd io.Reader) error { _, err := io.Copy(io.Discard, rd); return err })
	var e *Error
	if !asError(err, &e) || e.Reason != "output limit" {
		t.Fatalf("want output limit, got %v", err)
	}
}

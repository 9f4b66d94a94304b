// Command forge-codex-plugin is the Codex workspace plugin for protocol
// v1. It implements workspace_edit by running the Codex CLI
// non-interactively in the workspace (see pkg/codex for the exact argv,
// prompt, output schema and outcome rules) and selects, from what the
// Worker offers, workspace_edit, progress, cancel, commit_subject and
// agent_report.
//
// Usage:
//
//	forge-codex-plugin [-profile FILE]  speak protocol v1 on stdin/stdout
//	forge-codex-plugin --version        print the version line
//
// -profile names the operator profile (strict JSON: model, reasoning
// effort, one provider; see codex.ParseProfile and docs/codex.md). It is
// read once at start; an invalid profile is a usage error (exit 2, a
// value-free reason on stderr).
//
// Environment: CODEX_BIN names the Codex executable (default "codex",
// looked up in PATH); CODEX_HOME is the operator's Codex directory, of
// which only auth.json is read (copied read-only into each run's private
// CODEX_HOME; the directory itself is never written or handed to Codex).
// Codex gets the plugin's environment, which the Worker has already
// restricted to its allowlist (for example PATH, CODEX_HOME, CODEX_BIN and
// the profile's provider key variable), with CODEX_HOME replaced by the
// private one. The private run directory is created in the plugin's
// working directory when the Worker made it private, else under TMPDIR.
//
// The plugin never commits and never reports business success: a result
// frame only says the edit step ran; the Worker validates the workspace,
// runs the checks and commits. The result carries the commit subject and
// the agent report only when negotiated and valid (invalid ones are
// omitted, never repaired). Failures: a missing workspace directory is
// invalid_request; Codex not found or not startable is incompatible; a
// failed, timed-out, over-budget or malformed Codex run is
// execution_failed; a Worker cancel is cancelled, after Codex's process
// group has been stopped. Progress is fixed text ("codex started", "codex
// editing", "codex finished"). Codex's stdout and stderr never leave the
// plugin; stderr carries only fixed diagnostic lines.
//
// On Linux the binary is also its own child-subreaper wrapper (first
// argument supervise.ReaperArg): Codex runs under it, so descendants that
// left Codex's process group are stopped before the plugin answers.
//
// Exit codes: 0 after a complete session (result or failure frame), 1 when
// the session broke (invalid frame, unexpected input, I/O error), 2 for
// usage errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/codex"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

const name = "forge-codex-plugin"

// errUsage marks command-line errors (exit 2).
var errUsage = errors.New("usage: forge-codex-plugin [-profile FILE] | --version")

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	opt := options{env: os.Environ(), tempDir: privateWorkDir()}
	if self, err := supervise.Self(); err == nil { // else no wrapper: process-group cleanup only
		opt.reaper = supervise.NewReaperPool(self)
		defer opt.reaper.Close()
	}
	return runWith(ctx, args, opt, stdin, stdout, stderr)
}

// options are what run takes from the process; tests set them directly.
type options struct {
	env     []string
	reaper  *supervise.ReaperPool
	tempDir string // parent of Codex's private run directory ("": TMPDIR)
}

// privateWorkDir returns the working directory when it is private (a
// directory, not a symbolic link, mode 0700, owned by this user), as the
// Worker gives every plugin one under its runtime_root, else "". The run
// directory (schema, Codex's final message) then lives there, outside the
// temporary directories Codex's workspace-write sandbox lets it write, so
// no Codex run (another lane's included) can reach it.
func privateWorkDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	fi, err := os.Lstat(wd)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return ""
	}
	return wd
}

// handlerBound bounds how long the plugin waits, after its session ended,
// for a still-running Codex to be stopped (supervise's kill grace plus a
// margin for reaping).
const handlerBound = codex.DefaultKillGrace + 500*time.Millisecond

func runWith(ctx context.Context, args []string, opt options, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	version := fs.Bool("version", false, "print the version line")
	profilePath := fs.String("profile", "", "operator profile file")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, name+": error: "+errUsage.Error())
		return errUsage
	}
	if *version {
		_, err := fmt.Fprintln(stdout, buildinfo.Line(name))
		return err
	}
	var profile codex.Profile
	if *profilePath != "" {
		var err error
		if profile, err = codex.LoadProfile(*profilePath); err != nil {
			fmt.Fprintln(stderr, name+": error: "+err.Error())
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	p := &editor{
		cfg: codex.Config{
			Bin:        lookupEnv(opt.env, "CODEX_BIN"),
			Env:        opt.env,
			Reaper:     opt.reaper,
			TempDir:    opt.tempDir,
			AuthSource: lookupEnv(opt.env, "CODEX_HOME"),
			Profile:    profile,
		},
		diag: &lockedWriter{w: stderr},
	}
	caps := []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapCommitSubject, plugin.CapAgentReport}
	err := serve.ServeWithProgress(ctx, stdin, stdout, caps, p.edit)
	// serve cancels the handler's context when it returns; Codex must be
	// gone before this process exits, so wait for the handler (bounded).
	p.close(handlerBound)
	if err != nil {
		p.diag.line("error: " + err.Error())
	}
	return err
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// editor is the workspace_edit handler plus the bookkeeping that lets run
// wait for a handler still stopping Codex.
type editor struct {
	cfg  codex.Config
	diag *lockedWriter

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (p *editor) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// close refuses new handlers and waits up to bound for running ones.
func (p *editor) close(bound time.Duration) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.diag.line("warning: codex was still being stopped at exit")
	}
}

func (p *editor) edit(ctx context.Context, req serve.Request, progress serve.Progress) (serve.Result, error) {
	if !p.enter() {
		return serve.Result{}, serve.Fail(plugin.CategoryCancelled)
	}
	defer p.wg.Done()
	out, err := codex.Run(ctx, p.cfg, codex.Request{
		Workspace:   req.Workspace,
		Instruction: req.Instruction,
		Timeout:     req.Timeout,
		Want: codex.Want{
			Subject: req.Negotiated(plugin.CapCommitSubject),
			Report:  req.Negotiated(plugin.CapAgentReport),
		},
	}, codex.Progress(progress))
	if err != nil {
		// The error text is a fixed reason: no path, argv or output.
		p.diag.line(err.Error())
		return serve.Result{}, serve.Fail(codex.CategoryOf(err))
	}
	if out.SubjectDropped {
		p.diag.line("codex: commit subject omitted (missing or invalid)")
	}
	if out.ReportDropped {
		p.diag.line("codex: agent report omitted (missing or invalid)")
	}
	if out.ErrorEvents > 0 || out.ErrorItems > 0 {
		p.diag.line(fmt.Sprintf("codex: completed after %d error events and %d error items (retries, fallbacks)", out.ErrorEvents, out.ErrorItems))
	}
	if out.UnknownEvents > 0 {
		p.diag.line(fmt.Sprintf("codex: ignored %d events of unknown type", out.UnknownEvents))
	}
	return serve.Result{CommitSubject: out.CommitSubject, Summary: out.Summary, Changes: out.Changes}, nil
}

// lockedWriter serializes the plugin's diagnostic lines on stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, name+": "+s)
}

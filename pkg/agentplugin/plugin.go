// Package agentplugin is the protocol v1 workspace_edit plugin over one
// agent adapter: the part of forge-codex-plugin, forge-claude-plugin and
// forge-gemini-plugin that is not about their agent. It parses the command
// line (-profile FILE, --version, --cli), loads the operator profile
// through the adapter, serves one session (pkg/plugin/serve with progress), runs the adapter
// for the execute, maps a failed run to its protocol category, waits for
// a still-stopping agent before the process exits, and writes only fixed,
// value-free diagnostic lines on stderr (plus, after a failed run, the
// bounded redacted raw tail of the agent's event stream, quoted).
//
// An invalid profile is a misconfiguration, not a broken session: the
// plugin still speaks the protocol and answers the execute with failure
// incompatible (which the Worker reports as the terminal
// plugin_incompatible) after one stderr line naming the member and rule.
// Exit codes: 0 after a complete session (result or failure frame), 1
// when the session broke (invalid frame, unexpected input, I/O error), 2
// for usage errors (unknown flags or arguments).
package agentplugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Adapter is one agent behind the plugin: forge-codex-plugin's Codex,
// forge-claude-plugin's Claude Code, forge-gemini-plugin's Gemini CLI.
type Adapter interface {
	// Capabilities are the adapter's declared semantics; the plugin
	// selects protocol capabilities from them.
	Capabilities() agent.Capabilities
	// Run performs one workspace edit; errors are *agent.Error.
	Run(ctx context.Context, req agent.Request, progress agent.Progress) (agent.Outcome, error)
}

// Setup is what an adapter is built from.
type Setup struct {
	Env     []string // the plugin's environment (the Worker's allowlist)
	Reaper  *supervise.ReaperPool
	TempDir string // parent of the private run directories ("": TMPDIR)
	Profile string // -profile FILE ("" for none)
}

// Plugin names one plugin binary and how it builds its adapter. New
// returns a *agent.ProfileError (or another error) when the profile is
// unusable; the plugin then fails every execute as incompatible.
type Plugin struct {
	Name  string // the binary's name: forge-codex-plugin
	Agent string // the adapter's name: codex
	CLI   CLI
	New   func(Setup) (Adapter, error)
}

// CLI is the agent CLI a plugin drives, as --cli prints it for forge
// doctor: "ENV DEFAULT CHECKED", one line.
type CLI struct {
	Env     string // the variable naming its executable: CODEX_BIN
	Default string // the name looked up in PATH without it: codex
	Checked string // the npm release the adapter was checked against: @openai/codex@0.169.0
}

// Main is the whole main function of a plugin binary: the subreaper mode,
// signals, the session, the exit code.
func Main(p Plugin) int {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		return supervise.ReaperMain(os.Args[2:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ExitCode(Run(ctx, p, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// ErrUsage marks command-line errors (exit 2).
var ErrUsage = errors.New("usage error")

// ExitCode maps Run's error to the documented exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	return 1
}

// Run runs the plugin with the process's environment, working directory
// and, when the binary can wrap itself, a subreaper pool.
func Run(ctx context.Context, p Plugin, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	s := Setup{Env: os.Environ(), TempDir: PrivateWorkDir()}
	if self, err := supervise.Self(); err == nil { // else no wrapper: process-group cleanup only
		s.Reaper = supervise.NewReaperPool(self)
		defer s.Reaper.Close()
	}
	return RunWith(ctx, p, s, args, stdin, stdout, stderr)
}

// PrivateWorkDir returns the working directory when it is private (a
// directory, not a symbolic link, mode 0700, owned by this user), as the
// Worker gives every plugin one under its runtime_root, else "". Run
// directories then live there, outside the temporary directories the
// agent may write, so no agent run (another lane's included) can reach
// another's.
func PrivateWorkDir() string {
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
// for a still-running agent to be stopped (supervise's kill grace plus a
// margin for reaping).
const handlerBound = agent.DefaultKillGrace + 500*time.Millisecond

// RunWith is Run with the setup given (tests set it directly); the
// profile path comes from args.
func RunWith(ctx context.Context, p Plugin, s Setup, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	diag := &lockedWriter{w: stderr, prefix: p.Name + ": "}
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	version := fs.Bool("version", false, "print the version line")
	cli := fs.Bool("cli", false, "print the agent CLI's variable, default name and checked release")
	profile := fs.String("profile", "", "operator profile file")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		diag.line("error: usage: " + p.Name + " [-profile FILE] | --version | --cli")
		return ErrUsage
	}
	if *version {
		_, err := fmt.Fprintln(stdout, buildinfo.Line(p.Name))
		return err
	}
	if *cli {
		_, err := fmt.Fprintln(stdout, p.CLI.Env, p.CLI.Default, p.CLI.Checked)
		return err
	}
	s.Profile = *profile
	ad, err := p.New(s)
	if err != nil {
		// The error names the member and the rule, never a value.
		diag.line("error: " + err.Error())
		ad = misconfigured{agent: p.Agent}
	}
	e := &editor{ad: ad, diag: diag, agent: p.Agent}
	err = serve.ServeWithProgress(ctx, stdin, stdout, ad.Capabilities().PluginCapabilities(), e.edit)
	// serve cancels the handler's context when it returns; the agent must
	// be gone before this process exits, so wait for the handler (bounded).
	e.close(handlerBound)
	if err != nil {
		diag.line("error: " + err.Error())
	}
	return err
}

// misconfigured stands in for an adapter whose profile was refused: it
// negotiates the structured answer (the real adapter would) and fails
// every edit as a misconfiguration without starting anything.
type misconfigured struct{ agent string }

func (m misconfigured) Capabilities() agent.Capabilities {
	return agent.Capabilities{StructuredAnswer: true}
}

func (m misconfigured) Run(context.Context, agent.Request, agent.Progress) (agent.Outcome, error) {
	return agent.Outcome{}, agent.NewError(m.agent, agent.ReasonProfile)
}

// editor is the workspace_edit handler plus the bookkeeping that lets the
// plugin wait for a handler still stopping the agent.
type editor struct {
	ad    Adapter
	diag  *lockedWriter
	agent string

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (e *editor) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

// close refuses new handlers and waits up to bound for running ones.
func (e *editor) close(bound time.Duration) {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		e.diag.line("warning: " + e.agent + " was still being stopped at exit")
	}
}

func (e *editor) edit(ctx context.Context, req serve.Request, progress serve.Progress) (serve.Result, error) {
	if !e.enter() {
		return serve.Result{}, serve.Fail(plugin.CategoryCancelled)
	}
	defer e.wg.Done()
	out, err := e.ad.Run(ctx, agent.Request{
		Workspace:   req.Workspace,
		Instruction: req.Instruction,
		Timeout:     req.Timeout,
		Want: agent.Want{
			Subject: req.Negotiated(plugin.CapCommitSubject),
			Report:  req.Negotiated(plugin.CapAgentReport),
		},
	}, agent.Progress(progress))
	if err != nil {
		// The error text is a fixed reason: no path, argv or output.
		e.diag.line(err.Error())
		var ae *agent.Error
		if errors.As(err, &ae) && len(ae.Tail) > 0 {
			e.diag.line(e.agent + ": raw event tail (redacted): " + agent.Quoted(ae.Tail))
		}
		return serve.Result{}, serve.Fail(agent.CategoryOf(err))
	}
	if out.SubjectDropped {
		e.diag.line(e.agent + ": commit subject omitted (missing or invalid)")
	}
	if out.ReportDropped {
		e.diag.line(e.agent + ": agent report omitted (missing or invalid)")
	}
	if out.Diagnostics > 0 {
		e.diag.line(fmt.Sprintf("%s: completed after %d diagnostic events (retries, tool errors, fallbacks)", e.agent, out.Diagnostics))
	}
	return serve.Result{CommitSubject: out.CommitSubject, Summary: out.Summary, Changes: out.Changes}, nil
}

// lockedWriter serializes the plugin's diagnostic lines on stderr.
type lockedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (l *lockedWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, l.prefix+s)
}

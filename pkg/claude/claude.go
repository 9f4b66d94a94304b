package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Name is the adapter's name, in errors, progress and the run directory.
const Name = "claude"

// DefaultBin is the executable looked up when Config.Bin is empty.
const DefaultBin = "claude"

// Progress texts: fixed lifecycle wording, never executor output.
const (
	TextStarted   = Name + " started"
	TextWorking   = Name + " editing"
	TextFinalized = Name + " finished"
)

// Directories inside the run directory.
const (
	HomeDir   = "home"   // HOME
	ConfigDir = "config" // CLAUDE_CONFIG_DIR
	TmpDir    = "tmp"    // TMPDIR
)

// Tools is the only tool set Claude Code gets: reading and editing files
// (Edit creates a missing file from an empty old_string). Bash is left
// out: Claude Code 2.1.328 can keep the key from the commands it runs only
// with bubblewrap (CLAUDE_CODE_SUBPROCESS_ENV_SCRUB), which a Worker's
// plugin sandbox does not offer.
const Tools = "Read,Edit"

// Config is how runs are started.
type Config struct {
	// Bin is the CLAUDE_BIN value: a path (containing "/"), or a name
	// looked up in the PATH of Env. Empty means DefaultBin.
	Bin string
	// Env is the plugin's environment (the Worker's allowlist and the
	// gateway); Claude Code gets it without any ANTHROPIC_*, CLAUDE_*,
	// DISABLE_* or FORGE_GATEWAY_* variable, plus the run's own (Env).
	Env         []string
	Reaper      *supervise.ReaperPool
	OutputLimit int64
	KillGrace   time.Duration
	TempDir     string // parent of the private run directory
	Profile     Profile
}

// Adapter is the Claude Code adapter as a workspace plugin drives it
// (pkg/agentplugin).
type Adapter struct{ Config Config }

// Capabilities are what this adapter strategy (claude -p, stream-json,
// one process per run, Claude Code 2.1.328) really does: a structured
// event stream, a schema-checked final answer (--json-schema, returned as
// result.structured_output), tool calls and results in the stream,
// SIGTERM interruption, token usage in the result. It runs no commands
// (Bash is not in --tools), never resumes (--no-session-persistence) and
// has no decision backchannel (--permission-prompts none).
func (a Adapter) Capabilities() agent.Capabilities {
	return agent.Capabilities{
		StructuredEvents: true,
		StructuredAnswer: true,
		ToolLifecycle:    true,
		Interrupt:        true,
		Usage:            true,
	}
}

// Run performs one workspace edit (see the package documentation).
func (a Adapter) Run(ctx context.Context, req agent.Request, progress agent.Progress) (agent.Outcome, error) {
	return Run(ctx, a.Config, req, progress)
}

// Args returns the arguments after the program name for one run; schema
// is the compact --json-schema document, used only when structured.
func Args(p Profile, want agent.Want, schema string) []string {
	args := []string{
		"-p",
		"--bare",
		"--output-format", "stream-json",
		"--verbose",
		"--no-session-persistence",
		"--tools", Tools,
		"--restricted",
		"--permission-mode", "acceptEdits",
		"--permission-prompts", "none",
		"--strict-mcp-config",
		"--disable-slash-commands",
	}
	if p.Model != "" {
		args = append(args, "--model", p.Model)
	}
	if p.Effort != "" {
		args = append(args, "--effort", p.Effort)
	}
	if want.Structured() {
		args = append(args, "--json-schema", schema)
	}
	return args
}

// Env returns Claude Code's environment: env without every ANTHROPIC_*,
// CLAUDE_*, DISABLE_* and FORGE_GATEWAY_* variable, then the private
// directories, the gateway's credential as ANTHROPIC_API_KEY (the only key
// it ever sees), the gateway's base URL for the chosen provider as
// ANTHROPIC_BASE_URL and the switches that turn off everything Claude
// Code 2.1.328 would reach on its own (see the package documentation).
func Env(env []string, gw agent.Gateway, home, config, tmp string) []string {
	out := agent.WithoutEnv(env, func(k string) bool {
		return k == "HOME" || k == "TMPDIR" || strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "CLAUDE_") ||
			strings.HasPrefix(k, "DISABLE_") || strings.HasPrefix(k, "FORGE_GATEWAY_")
	})
	return append(out,
		"HOME="+home, "CLAUDE_CONFIG_DIR="+config, "TMPDIR="+tmp,
		"ANTHROPIC_API_KEY="+gw.Credential, "ANTHROPIC_BASE_URL="+gw.BaseURL,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1")
}

// Run performs one workspace edit with Claude Code. progress may be nil.
func Run(ctx context.Context, cfg Config, req agent.Request, progress agent.Progress) (agent.Outcome, error) {
	if progress == nil {
		progress = func(plugin.Stage, string) error { return nil }
	}
	if ctx.Err() != nil {
		return agent.Outcome{}, agent.NewError(Name, agent.ReasonCancelled)
	}
	if err := agent.CheckWorkspace(Name, req.Workspace); err != nil {
		return agent.Outcome{}, err
	}
	bin, err := agent.Resolve(Name, cfg.Bin, DefaultBin, cfg.Env)
	if err != nil {
		return agent.Outcome{}, err
	}
	gw, err := agent.SelectGateway(Name, cfg.Env, gateway.KindAnthropicMessages, cfg.Profile.Provider)
	if err != nil {
		return agent.Outcome{}, err
	}
	dir, err := agent.NewRunDir(Name, cfg.TempDir)
	if err != nil {
		return agent.Outcome{}, err
	}
	defer dir.Remove()
	var dirs [3]string
	for i, name := range []string{HomeDir, ConfigDir, TmpDir} {
		if dirs[i], err = dir.Home(name, nil); err != nil {
			return agent.Outcome{}, agent.NewError(Name, agent.ReasonSetup)
		}
	}
	var schema bytes.Buffer
	if req.Want.Structured() {
		if err := json.Compact(&schema, agent.Schema(req.Want)); err != nil {
			return agent.Outcome{}, agent.NewError(Name, agent.ReasonSetup)
		}
	}
	s, err := agent.Run(ctx, agent.Exec{
		Agent:       Name,
		Path:        bin,
		Args:        Args(cfg.Profile, req.Want, schema.String()),
		Env:         Env(cfg.Env, gw, dirs[0], dirs[1], dirs[2]),
		Dir:         req.Workspace,
		Stdin:       agent.Prompt(req.Instruction, req.Want),
		Timeout:     req.Timeout,
		Reaper:      cfg.Reaper,
		OutputLimit: cfg.OutputLimit,
		KillGrace:   cfg.KillGrace,
		Classify:    Classify,
		Rules:       Rules(),
		Secrets:     []string{gw.Credential},
	}, progress)
	if err != nil {
		return agent.Outcome{}, err
	}
	_ = progress(plugin.StageFinalizing, TextFinalized)
	return agent.Finish(s, s.Final, req.Want), nil
}

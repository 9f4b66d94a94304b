package codex

import (
	"context"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Name is the adapter's name, in errors, progress and the run directory.
const Name = "codex"

// DefaultBin is the executable looked up when Config.Bin is empty.
const DefaultBin = "codex"

// Progress texts: fixed lifecycle wording, never executor output.
const (
	TextStarted   = Name + " started"
	TextWorking   = Name + " editing"
	TextFinalized = Name + " finished"
)

// Config is how runs are started; the zero value of every optional field
// selects its default.
type Config struct {
	// Bin is the CODEX_BIN value: a path (containing "/"), or a name looked
	// up in the PATH of Env. Empty means DefaultBin.
	Bin string
	// Env is Codex's complete environment (KEY=value).
	Env []string
	// Reaper, when set, runs Codex under one of the pool's Linux
	// child-subreaper wrappers, so descendants that left its process group
	// are cleaned up before Run returns.
	Reaper *supervise.ReaperPool
	// OutputLimit is the combined stdout+stderr budget in bytes.
	OutputLimit int64
	// KillGrace is the delay between SIGTERM and SIGKILL to Codex's group.
	KillGrace time.Duration
	// TempDir is the parent of the private run directory; "" means the
	// system default.
	TempDir string
	// Profile is the operator's model and provider choice.
	Profile Profile
}

// ReasonOperatorHome: the plugin was given a CODEX_HOME. Codex's only
// key is the gateway's credential now, so an operator's auth.json (an API
// key or a ChatGPT sign-in) is never copied into a run.
const ReasonOperatorHome agent.Reason = "CODEX_HOME is set: an operator auth.json is no longer used; " +
	"declare the provider in worker.json providers and remove CODEX_HOME from both environment allowlists"

// codexEnv is Codex's environment: env without every OPENAI_* and CODEX_*
// variable (an ambient key, base URL or home) and without the gateway's
// URL and offer, which the configuration carries; the credential stays,
// as KeyEnv, and home is CODEX_HOME.
func codexEnv(env []string, home string) []string {
	env = agent.WithoutEnv(env, func(k string) bool {
		return strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "CODEX_") ||
			k == plugin.EnvGatewayURL || k == plugin.EnvGatewayProviders
	})
	return append(env, "CODEX_HOME="+home)
}

// Outcome is a completed run. The description fields hold only valid,
// wanted values; the rest is local diagnostics.
type Outcome = agent.Outcome

// Run performs one workspace edit with Codex. See the package
// documentation for the argv, the prompt, the outcome rules and the
// failure categories. progress may be nil.
func Run(ctx context.Context, cfg Config, req agent.Request, progress agent.Progress) (Outcome, error) {
	if progress == nil {
		progress = func(plugin.Stage, string) error { return nil }
	}
	if ctx.Err() != nil {
		return Outcome{}, agent.NewError(Name, agent.ReasonCancelled)
	}
	if err := agent.CheckWorkspace(Name, req.Workspace); err != nil {
		return Outcome{}, err
	}
	bin, err := agent.Resolve(Name, cfg.Bin, DefaultBin, cfg.Env)
	if err != nil {
		return Outcome{}, err
	}
	if agent.LookupEnv(cfg.Env, "CODEX_HOME") != "" {
		return Outcome{}, &agent.Error{Agent: Name, Reason: ReasonOperatorHome, Class: agent.ClassMisconfigured}
	}
	gw, err := agent.SelectGateway(Name, cfg.Env, gateway.KindOpenAIResponses, cfg.Profile.Provider)
	if err != nil {
		return Outcome{}, err
	}
	dir, err := agent.NewRunDir(Name, cfg.TempDir)
	if err != nil {
		return Outcome{}, err
	}
	defer dir.Remove()
	home, err := dir.Home(HomeDir, map[string][]byte{ConfigFile: ConfigTOML(cfg.Profile, gw)})
	if err != nil {
		return Outcome{}, agent.NewError(Name, agent.ReasonSetup)
	}
	schema, last := dir.Join(SchemaFile), dir.Join(LastMessageFile)
	if req.Want.Structured() {
		if err := agent.WritePrivate(schema, agent.Schema(req.Want)); err != nil {
			return Outcome{}, agent.NewError(Name, agent.ReasonSetup)
		}
	}
	s, err := agent.Run(ctx, agent.Exec{
		Agent:       Name,
		Path:        bin,
		Args:        Args(req.Workspace, req.Want, schema, last),
		Env:         codexEnv(cfg.Env, home),
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
		return Outcome{}, err
	}
	_ = progress(plugin.StageFinalizing, TextFinalized)
	var final []byte
	if req.Want.Structured() {
		final = agent.ReadBounded(last, agent.FinalMessageBytes)
	}
	return agent.Finish(s, final, req.Want), nil
}

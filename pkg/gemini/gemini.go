package gemini

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
const Name = "gemini"

// DefaultBin is the executable looked up when Config.Bin is empty.
const DefaultBin = "gemini"

// Progress texts: fixed lifecycle wording, never executor output.
const (
	TextStarted   = Name + " started"
	TextWorking   = Name + " editing"
	TextFinalized = Name + " finished"
)

// Directories and files inside the run directory.
const (
	HomeDir = "home" // HOME: Gemini CLI's ~/.gemini, with the run's settings
	TmpDir  = "tmp"  // TMPDIR
	// NoneDir is never created: the system settings and system defaults
	// paths point into it, so no host-wide file is read.
	NoneDir      = "none"
	SettingsFile = ".gemini/settings.json" // in HomeDir, read-only
)

// Tools is the only tool set Gemini CLI gets (settings tools.core): reading
// files and directories, and editing files (replace, which also creates a
// missing file from an empty old_string, and write_file). No shell: the
// commands it runs would inherit the environment, credential included,
// and checks are the Worker's; no web tools, search (which downloads
// ripgrep), memory, sub-agents or skills.
var Tools = []string{"read_file", "list_directory", "replace", "write_file"}

// Settings returns the run's user settings file
// (HOME/.gemini/settings.json; see the package documentation for each
// member), tools.core being Tools.
func Settings() []byte {
	return []byte(`{"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false,` +
		`"checkpointing":{"enabled":false}},` +
		`"privacy":{"usageStatisticsEnabled":false},` +
		`"telemetry":{"enabled":false},` +
		`"security":{"folderTrust":{"enabled":false},"auth":{"selectedType":"gemini-api-key"}},` +
		`"tools":{"core":["` + strings.Join(Tools, `","`) + `"],"useRipgrep":false},` +
		`"advanced":{"ignoreLocalEnv":true},` +
		`"admin":{"extensions":{"enabled":false},"mcp":{"enabled":false},"skills":{"enabled":false}},` +
		`"skills":{"enabled":false},` +
		`"hooksConfig":{"enabled":false},` +
		`"ide":{"enabled":false},` +
		`"model":{"disableLoopDetection":true,"skipNextSpeakerCheck":true}}` + "\n")
}

// answerFormat follows the structured prompt: Gemini CLI has no output
// schema, so the answer is the model's last text, read strictly.
const answerFormat = "Reply with the JSON object alone: no code fence, no other text before or after it.\n"

// Config is how runs are started.
type Config struct {
	// Bin is the GEMINI_BIN value: a path (containing "/"), or a name
	// looked up in the PATH of Env. Empty means DefaultBin.
	Bin string
	// Env is the plugin's environment (the Worker's allowlist and the
	// gateway); Gemini CLI gets it without the variables Env drops, plus
	// the run's own.
	Env         []string
	Reaper      *supervise.ReaperPool
	OutputLimit int64
	KillGrace   time.Duration
	TempDir     string // parent of the private run directory
	Profile     Profile
}

// Adapter is the Gemini CLI adapter as a workspace plugin drives it
// (pkg/agentplugin).
type Adapter struct{ Config Config }

// Capabilities are what this adapter strategy (gemini -p, stream-json,
// one process per run, Gemini CLI 0.61.0) really does: a structured event
// stream, a final answer asked for by the prompt and kept only when it is
// exactly the wanted JSON object, tool calls and results in the stream,
// SIGTERM interruption, token usage in the result. It runs no commands
// (no shell in tools.core), never resumes and has no decision backchannel
// (headless: whatever would ask is denied).
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

// Args returns the arguments after the program name for one run.
func Args(p Profile) []string {
	args := []string{"--prompt", "", "--output-format", "stream-json"}
	if p.Model != "" {
		args = append(args, "--model", p.Model)
	}
	return args
}

// dropped reports the variables of the plugin's environment Gemini CLI
// never gets: its own, Google's, the proxies, Node's options, telemetry
// and the sandbox switches (any of them could redirect a run, widen it or
// start something), the gateway's, and the directories the run sets.
func dropped(k string) bool {
	u := strings.ToUpper(k)
	for _, p := range []string{"GEMINI_", "GOOGLE_", "CLOUDSDK_", "OTEL_", "FORGE_GATEWAY_", "SANDBOX", "NODE_", "DEBUG"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	switch u {
	case "HOME", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "CLOUD_SHELL", "SEATBELT_PROFILE", "BUILD_SANDBOX":
		return true
	}
	return false
}

// Env returns Gemini CLI's environment: env without the variables dropped
// reports, then the private directories, the paths that keep host-wide
// settings out, the untrusted workspace, a single process, the gateway's
// base URL for the chosen provider and its credential as the API key (the
// only key it ever sees).
func Env(env []string, gw agent.Gateway, home, tmp, none string) []string {
	return append(agent.WithoutEnv(env, dropped),
		"HOME="+home, "TMPDIR="+tmp,
		"GEMINI_CLI_SYSTEM_SETTINGS_PATH="+none+"/settings.json",
		"GEMINI_CLI_SYSTEM_DEFAULTS_PATH="+none+"/system-defaults.json",
		"GEMINI_CLI_TRUST_WORKSPACE=false",
		"GEMINI_CLI_NO_RELAUNCH=true",
		"GOOGLE_GEMINI_BASE_URL="+gw.BaseURL,
		"GEMINI_API_KEY="+gw.Credential)
}

// Prompt is the run's prompt: agent.Prompt, and for a structured answer
// the rule that it is the JSON object alone.
func Prompt(instruction string, want agent.Want) string {
	p := agent.Prompt(instruction, want)
	if want.Structured() {
		p += answerFormat
	}
	return p
}

// Run performs one workspace edit with Gemini CLI. progress may be nil.
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
	gw, err := agent.SelectGateway(Name, cfg.Env, gateway.KindGeminiGenerateContent, cfg.Profile.Provider)
	if err != nil {
		return agent.Outcome{}, err
	}
	dir, err := agent.NewRunDir(Name, cfg.TempDir)
	if err != nil {
		return agent.Outcome{}, err
	}
	defer dir.Remove()
	home, err := dir.Home(HomeDir, map[string][]byte{SettingsFile: Settings()})
	if err != nil {
		return agent.Outcome{}, agent.NewError(Name, agent.ReasonSetup)
	}
	tmp, err := dir.Home(TmpDir, nil)
	if err != nil {
		return agent.Outcome{}, agent.NewError(Name, agent.ReasonSetup)
	}
	var st Stream
	s, err := agent.Run(ctx, agent.Exec{
		Agent:       Name,
		Path:        bin,
		Args:        Args(cfg.Profile),
		Env:         Env(cfg.Env, gw, home, tmp, dir.Join(NoneDir)),
		Dir:         req.Workspace,
		Stdin:       Prompt(req.Instruction, req.Want),
		Timeout:     req.Timeout,
		Reaper:      cfg.Reaper,
		OutputLimit: cfg.OutputLimit,
		KillGrace:   cfg.KillGrace,
		Classify:    st.Classify,
		Rules:       Rules(),
		Secrets:     []string{gw.Credential},
	}, progress)
	if err != nil {
		return agent.Outcome{}, err
	}
	_ = progress(plugin.StageFinalizing, TextFinalized)
	return agent.Finish(s, s.Final, req.Want), nil
}

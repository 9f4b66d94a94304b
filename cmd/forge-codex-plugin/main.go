// Command forge-codex-plugin is the Codex workspace plugin for protocol
// v1. It implements workspace_edit by running the Codex CLI
// non-interactively in the workspace (see pkg/codex for the exact argv,
// prompt, output schema and outcome rules) and selects, from what the
// Worker offers, workspace_edit, progress, cancel, commit_subject and
// agent_report. The session, the flags, the diagnostics and the exit codes
// are pkg/agentplugin's.
//
// Usage:
//
//	forge-codex-plugin [-profile FILE]  speak protocol v1 on stdin/stdout
//	forge-codex-plugin --version        print the version line
//	forge-codex-plugin --cli            print its CLI's variable, default name and checked release
//
// -profile names the operator profile (strict JSON: model, reasoning
// effort, the worker.json provider id; see codex.ParseProfile and
// docs/codex.md). An invalid profile makes every execute fail as
// incompatible (the Worker's terminal plugin_incompatible), after a
// value-free reason on stderr.
//
// Environment: CODEX_BIN names the Codex executable (default "codex",
// looked up in PATH); FORGE_GATEWAY_URL, FORGE_GATEWAY_TOKEN and
// FORGE_GATEWAY_PROVIDERS are the Worker's model gateway: Codex's provider
// is the gateway's path for the profile's provider (or the only
// openai-responses one) and its only key the attempt's credential. Codex
// gets the plugin's environment, which the Worker has already restricted
// to its allowlist, without any OPENAI_* or CODEX_* variable, with a
// private CODEX_HOME. A CODEX_HOME in the plugin's environment (an
// operator's auth.json) is refused as a misconfiguration. On Linux the
// binary is also its own child-subreaper wrapper (first argument
// supervise.ReaperArg).
//
// Exit codes: 0 after a complete session (result or failure frame), 1 when
// the session broke (invalid frame, unexpected input, I/O error), 2 for
// usage errors.
package main

import (
	"os"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agentplugin"
	"github.com/0k-lab/agent-forge/pkg/codex"
)

func main() { os.Exit(agentplugin.Main(codexPlugin())) }

func codexPlugin() agentplugin.Plugin {
	return agentplugin.Plugin{Name: "forge-codex-plugin", Agent: codex.Name, New: newAdapter,
		CLI: agentplugin.CLI{Env: "CODEX_BIN", Default: "codex", Checked: "@openai/codex@0.169.0"}}
}

func newAdapter(s agentplugin.Setup) (agentplugin.Adapter, error) {
	var p codex.Profile
	if s.Profile != "" {
		var err error
		if p, err = codex.LoadProfile(s.Profile); err != nil {
			return nil, err
		}
	}
	return codex.Adapter{Config: codex.Config{
		Bin:     agent.LookupEnv(s.Env, "CODEX_BIN"),
		Env:     s.Env,
		Reaper:  s.Reaper,
		TempDir: s.TempDir,
		Profile: p,
	}}, nil
}

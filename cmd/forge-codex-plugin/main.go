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
//
// -profile names the operator profile (strict JSON: model, reasoning
// effort, one provider; see codex.ParseProfile and docs/agents.md). An
// invalid profile makes every execute fail as incompatible (the Worker's
// terminal plugin_incompatible), after a value-free reason on stderr.
//
// Environment: CODEX_BIN names the Codex executable (default "codex",
// looked up in PATH); CODEX_HOME is the operator's Codex directory, of
// which only auth.json is read (copied read-only into each run's private
// CODEX_HOME; the directory itself is never written or handed to Codex).
// Codex gets the plugin's environment, which the Worker has already
// restricted to its allowlist, with CODEX_HOME replaced by the private
// one. On Linux the binary is also its own child-subreaper wrapper (first
// argument supervise.ReaperArg).
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
	return agentplugin.Plugin{Name: "forge-codex-plugin", Agent: codex.Name, New: newAdapter}
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
		Bin:        agent.LookupEnv(s.Env, "CODEX_BIN"),
		Env:        s.Env,
		Reaper:     s.Reaper,
		TempDir:    s.TempDir,
		AuthSource: agent.LookupEnv(s.Env, "CODEX_HOME"),
		Profile:    p,
	}}, nil
}

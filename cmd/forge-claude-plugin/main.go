// Command forge-claude-plugin is the Claude Code workspace plugin for
// protocol v1. It implements workspace_edit by running the Claude Code CLI
// headless in the workspace (see pkg/claude for the exact argv,
// environment, private directories and outcome rules) and selects, from
// what the Worker offers, workspace_edit, progress, cancel, commit_subject
// and agent_report. The session, the flags, the diagnostics and the exit
// codes are pkg/agentplugin's.
//
// Usage:
//
//	forge-claude-plugin [-profile FILE]  speak protocol v1 on stdin/stdout
//	forge-claude-plugin --version        print the version line
//	forge-claude-plugin --cli            print its CLI's variable, default name and checked release
//
// -profile names the operator profile (strict JSON: model, effort, the
// worker.json provider id; see claude.ParseProfile and docs/agents.md).
// An invalid profile makes every execute fail as incompatible (the
// Worker's terminal plugin_incompatible), after a value-free reason on
// stderr.
//
// Environment: CLAUDE_BIN names the Claude Code executable (default
// "claude", looked up in PATH); FORGE_GATEWAY_URL, FORGE_GATEWAY_TOKEN and
// FORGE_GATEWAY_PROVIDERS are the Worker's model gateway: Claude Code's
// ANTHROPIC_BASE_URL is the gateway's path for the profile's provider (or
// the only anthropic-messages one) and its ANTHROPIC_API_KEY the
// attempt's credential, the only key it ever sees.
// On Linux the binary is also its own child-subreaper wrapper (first
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
	"github.com/0k-lab/agent-forge/pkg/claude"
)

func main() { os.Exit(agentplugin.Main(claudePlugin())) }

func claudePlugin() agentplugin.Plugin {
	return agentplugin.Plugin{Name: "forge-claude-plugin", Agent: claude.Name, New: newAdapter,
		CLI: agentplugin.CLI{Env: "CLAUDE_BIN", Default: claude.DefaultBin, Checked: "@anthropic-ai/claude-code@2.1.328"}}
}

func newAdapter(s agentplugin.Setup) (agentplugin.Adapter, error) {
	var p claude.Profile
	if s.Profile != "" {
		var err error
		if p, err = claude.LoadProfile(s.Profile); err != nil {
			return nil, err
		}
	}
	return claude.Adapter{Config: claude.Config{
		Bin:     agent.LookupEnv(s.Env, "CLAUDE_BIN"),
		Env:     s.Env,
		Reaper:  s.Reaper,
		TempDir: s.TempDir,
		Profile: p,
	}}, nil
}

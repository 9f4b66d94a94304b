// Command forge-gemini-plugin is the Gemini CLI workspace plugin for
// protocol v1. It implements workspace_edit by running Gemini CLI headless
// in the workspace (see pkg/gemini for the exact argv, environment,
// settings, private directories and outcome rules) and selects, from what
// the Worker offers, workspace_edit, progress, cancel, commit_subject and
// agent_report. The session, the flags, the diagnostics and the exit codes
// are pkg/agentplugin's.
//
// Usage:
//
//	forge-gemini-plugin [-profile FILE]  speak protocol v1 on stdin/stdout
//	forge-gemini-plugin --version        print the version line
//	forge-gemini-plugin --cli            print its CLI's variable, default name and checked release
//
// -profile names the operator profile (strict JSON: model and the
// worker.json provider id; see gemini.ParseProfile and docs/agents.md).
// An invalid profile makes every execute fail as incompatible (the
// Worker's terminal plugin_incompatible), after a value-free reason on
// stderr.
//
// Environment: GEMINI_BIN names the Gemini CLI executable (default
// "gemini", looked up in PATH; the npm package's bin is a Node.js script,
// so node must be on the PATH too); FORGE_GATEWAY_URL, FORGE_GATEWAY_TOKEN
// and FORGE_GATEWAY_PROVIDERS are the Worker's model gateway: Gemini
// CLI's GOOGLE_GEMINI_BASE_URL is the gateway's path for the profile's
// provider (or the only gemini-generate-content one) and its
// GEMINI_API_KEY the attempt's credential, the only key it ever sees.
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
	"github.com/0k-lab/agent-forge/pkg/gemini"
)

func main() { os.Exit(agentplugin.Main(geminiPlugin())) }

func geminiPlugin() agentplugin.Plugin {
	return agentplugin.Plugin{Name: "forge-gemini-plugin", Agent: gemini.Name, New: newAdapter,
		CLI: agentplugin.CLI{Env: "GEMINI_BIN", Default: gemini.DefaultBin, Checked: "@google/gemini-cli@0.61.0"}}
}

func newAdapter(s agentplugin.Setup) (agentplugin.Adapter, error) {
	var p gemini.Profile
	if s.Profile != "" {
		var err error
		if p, err = gemini.LoadProfile(s.Profile); err != nil {
			return nil, err
		}
	}
	return gemini.Adapter{Config: gemini.Config{
		Bin:     agent.LookupEnv(s.Env, "GEMINI_BIN"),
		Env:     s.Env,
		Reaper:  s.Reaper,
		TempDir: s.TempDir,
		Profile: p,
	}}, nil
}

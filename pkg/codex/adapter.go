package codex

import (
	"context"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// Adapter is the Codex adapter as a workspace plugin drives it
// (pkg/agentplugin).
type Adapter struct{ Config Config }

// Capabilities are what this adapter strategy (codex exec --json, one
// process per run, codex-cli 0.169.0) really does: a structured event
// stream, a schema-shaped final answer (--output-schema), tool items,
// SIGTERM interruption, shell commands confined by Codex's own sandbox
// (no network; the files: workspace-write on macOS, the Worker's sandbox
// on Linux), token usage in turn.completed. It never resumes (--ephemeral) and has no decision backchannel (approvals never).
func (a Adapter) Capabilities() agent.Capabilities {
	return agent.Capabilities{
		StructuredEvents: true,
		StructuredAnswer: true,
		ToolLifecycle:    true,
		Interrupt:        true,
		RunsCommands:     true,
		CommandSandbox:   true,
		Usage:            true,
	}
}

// Run performs one workspace edit (see Run).
func (a Adapter) Run(ctx context.Context, req agent.Request, progress agent.Progress) (agent.Outcome, error) {
	return Run(ctx, a.Config, req, progress)
}

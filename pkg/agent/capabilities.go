package agent

import (
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Capabilities are what one adapter strategy really does, declared by the
// adapter from the vendor CLI it drives (the version it was checked
// against), never assumed from the vendor's name. Each member is one
// semantic; none stands for a bundle.
type Capabilities struct {
	// StructuredEvents: the agent writes a machine-readable event stream
	// that the completion table reads (provider completion is distinct
	// from process exit).
	StructuredEvents bool
	// StructuredAnswer: the agent can end with a schema-shaped final
	// answer (the commit subject and agent report).
	StructuredAnswer bool
	// ToolLifecycle: tool calls and their results (errors included) are
	// events of the stream.
	ToolLifecycle bool
	// Interrupt: SIGTERM to the agent stops the run promptly.
	Interrupt bool
	// RunsCommands: the agent can run shell commands in the workspace.
	RunsCommands bool
	// CommandSandbox: commands the agent runs are confined by the agent
	// itself (beyond the Worker's plugin sandbox).
	CommandSandbox bool
	// Usage: the stream reports token usage.
	Usage bool
	// Resume: a run can continue an earlier conversation. No adapter
	// uses it (every run is ephemeral), so none declares it.
	Resume bool
	// DecisionBackchannel: the agent can put a question to a person mid
	// run. Runs are unattended; none declares it.
	DecisionBackchannel bool
}

// PluginCapabilities returns the protocol v1 capabilities a workspace
// plugin over this adapter selects from the Worker's offer (progress and
// cancel are the server's): workspace_edit, plus commit_subject and
// agent_report only with a structured answer.
func (c Capabilities) PluginCapabilities() []plugin.Capability {
	caps := []plugin.Capability{plugin.CapWorkspaceEdit}
	if c.StructuredAnswer {
		caps = append(caps, plugin.CapCommitSubject, plugin.CapAgentReport)
	}
	return caps
}

// Request is one workspace edit.
type Request struct {
	Workspace   string // absolute path of the Git worktree
	Instruction string
	Timeout     time.Duration
	Want        Want
}

// Outcome is a completed run. The description fields hold only valid,
// wanted values; the rest is local diagnostics.
type Outcome struct {
	Description
	SubjectDropped bool // a subject was wanted but none valid was given
	ReportDropped  bool // a report was wanted but none valid was given
	Diagnostics    int  // diagnostic events (retries, tool errors, fallbacks)
}

// Finish builds the outcome of a completed stream from the final answer
// (raw JSON, nil for none) under the fallback rules of ParseFinal.
func Finish(s Stream, final []byte, want Want) Outcome {
	out := Outcome{Diagnostics: s.Diagnostics}
	if want.Structured() {
		out.Description = ParseFinal(final, want)
		out.SubjectDropped = want.Subject && out.CommitSubject == ""
		out.ReportDropped = want.Report && !out.HasReport()
	}
	return out
}

package codex

import "github.com/0k-lab/agent-forge/pkg/agent"

// File names inside the run's private directory.
const (
	SchemaFile      = "schema.json"
	LastMessageFile = "last-message.json"
)

// Args returns the arguments after the program name for one run. schema
// and lastMessage are the paths of the schema and final-message files;
// they are used only when want.Structured().
func Args(workspace string, want agent.Want, schema, lastMessage string) []string {
	args := []string{
		"exec",
		"--cd", workspace,
		"--sandbox", SandboxMode,
		"--ephemeral",
		"--strict-config",
		"--ignore-rules",
		"-c", `approval_policy="never"`,
		"-c", "sandbox_workspace_write.network_access=false",
		"--json",
	}
	if want.Structured() {
		args = append(args, "--output-schema", schema, "--output-last-message", lastMessage)
	}
	return append(args, "-")
}

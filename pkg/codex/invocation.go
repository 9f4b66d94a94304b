package codex

import "github.com/0k-lab/agent-forge/pkg/agent"

// File names inside the run's private directory.
const (
	SchemaFile      = "schema.json"
	LastMessageFile = "last-message.json"
)

// Args returns the arguments after the program name for one run. schema
// and lastMessage are the paths of the schema and final-message files;
// they are used only when want.Structured(). SandboxArgs are the
// platform's choice of Codex's own sandbox.
func Args(workspace string, want agent.Want, schema, lastMessage string) []string {
	args := append([]string{"exec", "--cd", workspace}, SandboxArgs()...)
	args = append(args,
		"--ephemeral",
		"--strict-config",
		"--ignore-rules",
		"-c", `approval_policy="never"`,
		"--json",
	)
	if want.Structured() {
		args = append(args, "--output-schema", schema, "--output-last-message", lastMessage)
	}
	return append(args, "-")
}

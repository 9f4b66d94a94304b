//go:build !linux

package codex

// SandboxArgs returns the flags that choose Codex's own sandbox for the
// commands it runs: elsewhere (macOS: seatbelt) workspace-write with the
// network off, the only layer, since there is no Worker sandbox there
// (darwin Workers run with "sandbox": "none"). It never restricts Codex's
// own connection to the model API.
func SandboxArgs() []string {
	return []string{"--sandbox", "workspace-write", "-c", "sandbox_workspace_write.network_access=false"}
}

//go:build !linux

package codex

// SandboxMode is Codex's own sandbox for the commands it runs: elsewhere
// (macOS: seatbelt) workspace-write, with network access off, is the only
// layer, since there is no Worker sandbox there (darwin Workers run with
// "sandbox": "none").
const SandboxMode = "workspace-write"

package codex

// SandboxMode is Codex's own sandbox for the commands it runs. On Linux
// Codex's workspace-write sandbox is bubblewrap, which needs a user
// namespace and mounts: the Worker's Landlock domain, around the plugin
// and everything it starts (docs/sandbox.md), allows no mount, and the
// installed Worker unit allows no namespace. So on Linux Codex adds no
// layer of its own and the Worker's sandbox is the boundary: Codex and
// its commands read and write what the Worker grants and nothing else,
// but the commands may use the network, which workspace-write denied.
const SandboxMode = "danger-full-access"

package codex

// PermissionProfile is the name of the Codex permission profile the
// adapter defines, on the command line, for every run on Linux.
const PermissionProfile = "forge"

// SandboxArgs returns the flags that choose Codex's own sandbox for the
// commands it runs. It never restricts Codex itself: its connection to
// the model API is not sandboxed by Codex on any platform.
//
// On Linux the Worker's Landlock domain (docs/sandbox.md), around the
// plugin and everything it starts, is what confines the files. Codex's
// workspace-write sandbox cannot run inside it: in codex-cli 0.169.0 every
// filesystem-restricted policy needs bubblewrap, that is a user namespace
// and mounts, which no Landlock domain may make (and the installed Worker
// unit forbids), and the deprecated legacy Landlock pipeline
// (features.use_legacy_landlock) refuses such policies ("filesystem-
// restricted execution requires bubblewrap to isolate app-server
// sockets"). The one restricted policy Codex applies without bubblewrap is
// full filesystem write with the network off: its helper (codex-linux-
// sandbox, Codex's own executable re-executed from CODEX_HOME/tmp) then
// only sets no_new_privs and installs a seccomp filter that refuses
// sockets other than AF_UNIX, connect and io_uring before it executes the
// command. So the permission profile below writes
// everywhere (the Worker's domain decides where that really is) and turns
// the network off: the commands Codex runs keep the network block that
// workspace-write gave them, and Codex keeps its model API.
//
// --sandbox is absent on purpose: with it, or a sandbox_mode in a loaded
// configuration, Codex ignores default_permissions. The -c overrides win
// over every configuration file, and the repository's own is not loaded
// (the project is untrusted).
func SandboxArgs() []string {
	return []string{
		"-c", `default_permissions="` + PermissionProfile + `"`,
		"-c", "permissions." + PermissionProfile + `.filesystem={":root"="write"}`,
		"-c", "permissions." + PermissionProfile + ".network.enabled=false",
	}
}

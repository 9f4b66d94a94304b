package install

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"strings"
)

// newToken returns 32 random bytes from crypto/rand as 64 hex digits.
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", errors.New("the system random source failed")
	}
	return hex.EncodeToString(b[:]), nil
}

// gateConfig is the installed gate.json: loopback only, the database in
// the Gate's StateDirectory, text jobs on the Worker's reference plugin.
func gateConfig(l Layout) []byte {
	return []byte(`{"version":1,"listen":"` + l.Listen + `","database":"` + Database + `",
 "owner_token_env":"` + OwnerTokenEnv + `","recovery_interval":"1s","lease_poll_interval":"100ms",
 "default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":3},
 "default_execution":{"plugin_id":"reference","environment":["PATH"],
   "plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s",
   "plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},
 "workers":[{"id":"` + WorkerID + `","pool":"local","token_env":"` + WorkerTokenEnv + `","concurrency":2}],
 "repositories":[]}
`)
}

// workerConfig is the installed worker.json. The plugins are not pinned
// by sha256: an upgrade replaces them while this file stays, and forge
// doctor verifies them against the receipt instead.
func workerConfig(l Layout) []byte {
	return []byte(`{"version":1,"gate_url":"ws://` + l.Listen + `","id":"` + WorkerID + `","token_env":"` + WorkerTokenEnv + `",
 "heartbeat_interval":"10s","concurrency":2,
 "repository_roots":["` + RepoRoot + `"],"worktree_root":"` + WorktreeRoot + `","runtime_root":"` + RuntimeRoot + `",
 "repositories":[],
 "plugins":[{"id":"reference","argv":["` + BinDir + `/forge-ref-plugin"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s",
   "plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
`)
}

// envFile renders a systemd EnvironmentFile of NAME=value lines.
func envFile(pairs ...string) []byte {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString(pairs[i] + "=" + pairs[i+1] + "\n")
	}
	return []byte(b.String())
}

// hardening is the sandbox both units share (docs/install.md lists the
// systemd-analyze security figures it reaches).
const hardening = `UMask=0077
NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
PrivateTmp=yes
PrivateDevices=yes
PrivateUsers=yes
PrivateMounts=yes
ProtectSystem=strict
ProtectHome=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
ProcSubset=pid
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RemoveIPC=yes
KeyringMode=private
DevicePolicy=closed
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @resources io_uring_setup io_uring_enter io_uring_register
SystemCallErrorNumber=EPERM
IPAddressDeny=any
IPAddressAllow=localhost
`

// identity renders the User=/Group= lines (none when running as root).
func identity(runAsRoot bool, account string) string {
	if runAsRoot {
		return ""
	}
	return "User=" + account + "\nGroup=" + account + "\n"
}

// sandboxSyscalls are the Worker's sandbox calls (DECISIONS 14): systemd
// 252's @system-service lacks them (they are only in @known), so the
// Worker unit allows them by name or every sandboxed attempt fails with
// EPERM. seccomp is also only in @known, and two sandboxes need it: the
// Worker's metadata guard (docs/sandbox.md: every sandboxed start installs
// a filter that hands chmod, chown, utimes and xattr calls to the reaper)
// and Codex's own (the helper that runs each of Codex's commands installs
// a seccomp filter keeping it off the network, docs/codex.md, and fails
// the command when that is refused). Installing a filter only ever takes
// rights away (and needs no_new_privs, which the unit sets), so allowing
// it costs no exposure. pidfd_getfd (only in @debug) is how the guard
// takes a sandboxed program's socket to make its UNIX connects itself:
// refused, every such connect failed (EBADF). It reaches only processes
// the Worker may ptrace (its own account's), and a sandboxed program's
// Landlock domain keeps it off every process outside that domain.
const sandboxSyscalls = "SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self seccomp pidfd_getfd\n"

// workerCgroup delegates the Worker unit's own cgroup to it (DECISIONS
// 21): every sandboxed program runs in a cgroup of its own below it,
// killed whole when it ends (docs/sandbox.md, "Containment"). systemd
// chowns that subtree to the Worker's account; ProtectControlGroups=yes
// still mounts the rest of /sys/fs/cgroup read-only, and ReadWritePaths=
// opens only the unit's own cgroup again, where it is on a pure cgroup v2
// host and on a hybrid one (the "-" skips the one that does not exist).
// systemd 257's ProtectControlGroups=private would give the unit a cgroup
// namespace instead; systemd 252 has none.
const workerCgroup = "Delegate=yes\nReadWritePaths=-/sys/fs/cgroup/system.slice/" + WorkerUnit +
	" -/sys/fs/cgroup/unified/system.slice/" + WorkerUnit + "\n"

func gateUnit(runAsRoot bool) []byte {
	return []byte(`[Unit]
Description=Agent Forge Gate
After=network.target

[Service]
Type=simple
` + identity(runAsRoot, GateAccount) + `EnvironmentFile=` + GateEnv + `
ExecStart=` + BinDir + `/forge-gate -config ` + GateConfig + `
Restart=on-failure
RestartSec=2s
StateDirectory=agent-forge/gate
StateDirectoryMode=0700
` + hardening + `
[Install]
WantedBy=multi-user.target
`)
}

func workerUnit(runAsRoot bool) []byte {
	return []byte(`[Unit]
Description=Agent Forge Worker
After=network.target ` + GateUnit + `

[Service]
Type=simple
` + identity(runAsRoot, WorkerAccount) + `EnvironmentFile=` + WorkerEnv + `
ExecStart=` + BinDir + `/forge-worker -config ` + WorkerConfig + `
Restart=on-failure
RestartSec=2s
StateDirectory=agent-forge/worker agent-forge/worker/worktrees agent-forge/worker/runtime agent-forge/worker/repositories
StateDirectoryMode=0700
` + hardening + sandboxSyscalls + workerCgroup + `
[Install]
WantedBy=multi-user.target
`)
}

// WorkerDropIn is the one drop-in forge doctor accepts on the Worker
// unit, and WorkerDropInText its only accepted content (docs/install.md
// shows it). IPAddressDeny=any holds for the Worker's own process, where
// the model gateway and the attempts' CONNECT proxy dial from: a Worker
// with providers or a policy with network_allow needs the network, and
// the Codex plugin (a JIT) writable executable memory. The attempts stay
// confined by the Worker's own sandbox (loopback only) whatever the unit
// says. Nothing else of the hardening may change.
const (
	WorkerDropIn     = UnitDir + "/" + WorkerUnit + ".d/providers.conf"
	WorkerDropInText = "[Service]\nIPAddressDeny=\nMemoryDenyWriteExecute=no\n"
)

// CheckWorkerDropIns checks the Worker unit's drop-in files (systemd's
// DropInPaths): none, or exactly WorkerDropIn with WorkerDropInText, a
// root-owned regular file no one else can write in a root-owned
// directory no one else can write. It returns a value-free problem or "".
func CheckWorkerDropIns(f FS, paths []string) string {
	switch {
	case len(paths) == 0:
		return ""
	case len(paths) > 1 || paths[0] != WorkerDropIn:
		return WorkerUnit + " has drop-ins other than " + WorkerDropIn + ": " + strings.Join(paths, " ")
	}
	for _, p := range []string{dirOf(WorkerDropIn), WorkerDropIn} {
		fi, err := f.Lstat(p)
		if err != nil {
			return p + " cannot be inspected"
		}
		uid, gid := Owner(fi)
		kind, ok := "regular file", fi.Mode().IsRegular()
		if p != WorkerDropIn {
			kind, ok = "directory", fi.IsDir()
		}
		if !ok || uid != 0 || gid != 0 || fi.Mode()&(0o022|fs.ModeSetuid|fs.ModeSetgid) != 0 {
			return p + " is not a root-owned " + kind + " only root can write"
		}
	}
	b, err := f.ReadFile(WorkerDropIn, 4096)
	if err != nil || string(b) != WorkerDropInText {
		return WorkerDropIn + " is not the drop-in docs/install.md gives (it may change nothing but IPAddressDeny= and MemoryDenyWriteExecute=no)"
	}
	return ""
}

package install

import (
	_ "embed"
	"path"
	"slices"
	"strings"
)

// Fixed installation layout (docs/install.md).
const (
	Prefix      = "/opt/agent-forge"
	BinDir      = Prefix + "/bin"
	ReceiptPath = Prefix + "/receipt.json"
	// LockPath is the root-owned installer lock beside the prefix.
	LockPath = "/opt/.agent-forge.lock"

	ConfigDir    = "/etc/agent-forge"
	GateConfig   = ConfigDir + "/gate.json"
	WorkerConfig = ConfigDir + "/worker.json"
	GateEnv      = ConfigDir + "/gate.env"
	WorkerEnv    = ConfigDir + "/worker.env"
	UnitDir      = "/etc/systemd/system"
	GateUnit     = "agent-forge-gate.service"
	WorkerUnit   = "agent-forge-worker.service"
	StateRoot    = "/var/lib/agent-forge"
	GateStateDir = StateRoot + "/gate"
	Database     = GateStateDir + "/forge.db"
	WorkerState  = StateRoot + "/worker"
	WorktreeRoot = WorkerState + "/worktrees"
	RuntimeRoot  = WorkerState + "/runtime"
	RepoRoot     = WorkerState + "/repositories"
	// GateAccount owns the Gate's state, configuration and keys;
	// WorkerAccount the Worker's runtime. Neither can read the other's.
	GateAccount    = "agent-forge-gate"
	WorkerAccount  = "agent-forge-worker"
	OwnerTokenEnv  = "FORGE_OWNER_TOKEN"
	WorkerTokenEnv = "FORGE_WORKER_TOKEN"
	WorkerID       = "worker-1"
	// DefaultListen is the Gate's loopback address.
	DefaultListen = "127.0.0.1:18080"
)

// agentPluginList is the one list of the agent plugins a release ships,
// one binary name a line: scripts/build-release.sh puts them in the
// Worker archives, scripts/render-formula.sh in the Homebrew Formula, the
// installer installs them and forge doctor checks each.
//
//go:embed agent-plugins.txt
var agentPluginList string

// AgentPlugins returns the agent plugin binaries of agent-plugins.txt, in
// its (byte-wise sorted) order.
func AgentPlugins() []string { return strings.Fields(agentPluginList) }

// executable is an installed binary and the archive kind it comes from.
type executable struct{ name, kind string }

// binaries are the installed executables in receipt (byte-wise name)
// order.
var binaries = binaryList()

func binaryList() []executable {
	bs := []executable{{"forge", "cli"}, {"forge-gate", "gate"}, {"forge-ref-plugin", "worker"}, {"forge-worker", "worker"}}
	for _, p := range AgentPlugins() {
		bs = append(bs, executable{p, "worker"})
	}
	slices.SortFunc(bs, func(a, b executable) int { return strings.Compare(a.name, b.name) })
	return bs
}

// Layout carries what may differ between hosts; production uses
// DefaultLayout. Only tests change it (to run fake services on a free port).
type Layout struct {
	Listen string
}

// DefaultLayout is the production layout.
func DefaultLayout() Layout { return Layout{Listen: DefaultListen} }

// UnitPath returns a unit file's path.
func UnitPath(unit string) string { return path.Join(UnitDir, unit) }

// TrustedAncestors are the directories every installed path hangs from;
// each must be a root-owned directory that no one else can write.
var TrustedAncestors = []string{"/", "/opt", "/etc", "/etc/systemd", UnitDir, "/var", "/var/lib"}

// ServiceAccounts are the two service accounts in creation order.
var ServiceAccounts = []string{GateAccount, WorkerAccount}

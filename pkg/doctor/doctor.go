// Package doctor implements `forge doctor`: a strictly read-only health
// report of the installation at /opt/agent-forge. It prints one
// "PASS <check-id>" or "FAIL <check-id>" line per check in a fixed order
// (a check with figures to report follows it with "INFO <id> key=value
// ..." lines), then "RESULT healthy" or "RESULT unhealthy". A failing check's reason
// (value-free: a fixed layout path and what is wrong with it) goes to the
// error stream. It never prints a token, config value, secret or database
// content, and never repairs, migrates, locks, rotates or manages services.
package doctor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/install"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Exit codes (DECISIONS 13).
const (
	ExitHealthy   = 0
	ExitConfig    = 1
	ExitUnhealthy = 2
)

// Checks are the check ids in report order: after worker-containment, one
// per agent plugin the release ships (install.AgentPlugins), named for
// it without "forge-" (codex-plugin for forge-codex-plugin).
var Checks = checkList()

func checkList() []string {
	ids := []string{
		"receipt",
		"cli-identity",
		"ancestors",
		"immutable-files",
		"mutable-paths",
		"account-separation",
		"gate-unit",
		"worker-unit",
		"worker-sandbox",
		"worker-containment",
	}
	for _, p := range install.AgentPlugins() {
		ids = append(ids, strings.TrimPrefix(p, "forge-"))
	}
	return append(ids,
		"gate-release",
		"worker-connected",
		"sqlite-schema",
		"state-space",
		"replication",
	)
}

// Run inspects the installation on h and writes the report to out and
// reasons to errOut; it returns the exit code.
func Run(ctx context.Context, h install.Host, self install.Self, out, errOut io.Writer) int {
	d := &doctor{ctx: ctx, h: h, f: h.FS(), self: self, now: time.Now}
	healthy := true
	for _, id := range Checks {
		problem := d.check(id)
		if problem == "" {
			fmt.Fprintf(out, "PASS %s\n", id)
		} else {
			healthy = false
			fmt.Fprintf(out, "FAIL %s\n", id)
			fmt.Fprintf(errOut, "forge doctor: FAIL %s: %s\n", id, problem)
		}
		for _, n := range d.notes {
			fmt.Fprintf(out, "INFO %s\n", n)
		}
		d.notes = nil
	}
	if healthy {
		fmt.Fprintln(out, "RESULT healthy")
		return ExitHealthy
	}
	fmt.Fprintln(out, "RESULT unhealthy")
	return ExitUnhealthy
}

type doctor struct {
	ctx     context.Context
	h       install.Host
	f       install.FS
	self    install.Self
	receipt *install.Receipt
	client  *install.GateClient
	// gateActive is set by the gate-unit check: the authenticated checks
	// run only against an active Gate unit.
	gateActive bool
	now        func() time.Time
	// notes are the figures the current check reports (INFO lines after
	// its PASS or FAIL line).
	notes []string
}

func (d *doctor) note(s string) { d.notes = append(d.notes, s) }

func (d *doctor) check(id string) string {
	if id != "receipt" && d.receipt == nil {
		return "no valid receipt"
	}
	switch id {
	case "receipt":
		return d.checkReceipt()
	case "cli-identity":
		r := d.receipt
		if d.self.Version != r.Version || d.self.Commit != r.Commit {
			return "this forge binary is not the installed release"
		}
		// Nothing is executed before it is verified: the ancestors and the
		// installed forge's digest against the receipt come first, and a
		// file that differs is never run.
		if p := first(install.CheckAncestors(d.f)); p != "" {
			return "not run: " + p
		}
		for _, fr := range r.Files {
			if fr.Path == install.BinDir+"/forge" {
				if p := install.CheckRecord(d.f, fr); p != "" {
					return "not run: " + p
				}
			}
		}
		out, err := d.f.Run(d.ctx, install.BinDir+"/forge", "--version")
		if err != nil || string(out) != "forge "+r.Version+" "+r.Commit+"\n" {
			return "the installed forge does not report the installed release"
		}
	case "ancestors":
		return first(append(install.CheckAncestors(d.f), install.CheckStateRoot(d.f)...))
	case "immutable-files":
		if p := first(install.CheckImmutable(d.f, d.receipt)); p != "" {
			return p
		}
		return d.checkUnitDigests()
	case "mutable-paths":
		if p := first(install.CheckMutable(d.f, d.receipt)); p != "" {
			return p
		}
		return d.checkState()
	case "account-separation":
		return first(append(install.CheckServiceAccounts(d.h.Accounts(), d.receipt), install.CheckSeparation(d.f, d.receipt)...))
	case "gate-unit":
		return d.checkUnit(install.GateUnit)
	case "worker-unit":
		return d.checkUnit(install.WorkerUnit)
	case "worker-sandbox":
		return d.checkSandbox()
	case "worker-containment":
		return d.checkContainment()
	case "gate-release":
		if !d.gateActive {
			return "not checked: the Gate unit is not active (the owner token is only sent to its main process)"
		}
		c, err := d.gate()
		if err != nil {
			return err.Error()
		}
		rel, err := c.Release(d.ctx)
		if err != nil {
			return err.Error()
		}
		r := d.receipt
		if rel.Version != r.Version || rel.Commit != r.Commit || rel.SchemaVersion != r.SchemaVersion {
			return "the running Gate is not the installed release"
		}
	case "worker-connected":
		if !d.gateActive {
			return "not checked: the Gate unit is not active (the owner token is only sent to its main process)"
		}
		c, err := d.gate()
		if err != nil {
			return err.Error()
		}
		up, err := c.WorkerConnected(d.ctx)
		if err != nil {
			return err.Error()
		}
		if !up {
			return "no lane of the installed Worker is connected"
		}
	case "sqlite-schema":
		return d.checkSchema()
	case "state-space":
		return d.checkSpace()
	case "replication":
		return d.checkReplication()
	default:
		if bin := "forge-" + id; slices.Contains(install.AgentPlugins(), bin) {
			return d.checkAgentPlugin(bin)
		}
	}
	return ""
}

// checkAgentPlugin requires the agent plugin bin to be installed as the
// receipt says, to answer --version with the installed release and to
// complete the protocol v1 handshake (handshake). As for cli-identity,
// nothing runs before the ancestors and its digest against the receipt
// have been checked.
func (d *doctor) checkAgentPlugin(bin string) string {
	path := install.BinDir + "/" + bin
	r := d.receipt
	i := slices.IndexFunc(r.Files, func(fr install.FileRecord) bool { return fr.Path == path })
	if i < 0 {
		return "the receipt does not list " + path
	}
	if p := first(install.CheckAncestors(d.f)); p != "" {
		return "not run: " + p
	}
	if p := install.CheckRecord(d.f, r.Files[i]); p != "" {
		return "not run: " + p
	}
	out, err := d.f.Run(d.ctx, path, "--version")
	if err != nil || string(out) != bin+" "+r.Version+" "+r.Commit+"\n" {
		return path + " does not report the installed release"
	}
	if p := handshake(d.ctx, d.f, path); p != "" {
		return p
	}
	return d.checkAgentCLI(path)
}

// handshake starts the plugin (no profile, the fixed environment of
// install.FS) and offers it the workspace capabilities in a protocol v1
// initialize; it must answer initialized for that id selecting
// workspace_edit. No execute follows: the plugin then exits on the closed
// input (nonzero, as the protocol has it), having started no agent.
func handshake(ctx context.Context, f install.FS, path string) string {
	id, err := plugin.NewID(rand.Reader)
	if err != nil {
		return "no frame id for the handshake"
	}
	offer := []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapProgress, plugin.CapCancel, plugin.CapCommitSubject, plugin.CapAgentReport}
	init, err := plugin.Encode(plugin.Frame{ID: id, Type: plugin.TypeInitialize, Capabilities: offer, Limits: plugin.V1Limits()})
	if err != nil {
		return "no initialize frame for the handshake"
	}
	out, _ := f.Exchange(ctx, path, init)
	line, _, ok := bytes.Cut(out, []byte("\n"))
	fr, err := plugin.DecodePluginFrame(line)
	if !ok || err != nil || fr.Type != plugin.TypeInitialized || fr.ID != id || !slices.Contains(fr.Capabilities, plugin.CapWorkspaceEdit) {
		return path + " does not answer a protocol v1 initialize as a workspace_edit plugin"
	}
	return ""
}

// checkSandbox fails when the installed worker.json opts out of the
// sandbox ("sandbox": "none": plugins and scoped checks run unconfined)
// or accepts a weaker one ("landlock-unscoped": they can signal
// processes of the Worker's account), or asks for a sandbox this kernel
// cannot give (the Worker then refuses to start): Landlock below the
// mode's ABI (sandbox.Accepts), or no seccomp user notification for the
// metadata guard (the probe filters a throwaway thread of this process
// only). Only that one field is read.
func (d *doctor) checkSandbox() string {
	b, err := d.f.ReadFile(install.WorkerConfig, 1<<20)
	if err != nil {
		return install.WorkerConfig + " cannot be read"
	}
	var c struct {
		Sandbox string `json:"sandbox"`
	}
	if json.Unmarshal(b, &c) != nil {
		return install.WorkerConfig + " is not a JSON object"
	}
	return sandboxVerdict(c.Sandbox, sandbox.ABI(), sandbox.ProbeGuard)
}

// sandboxVerdict is checkSandbox's answer for the mode worker.json names
// on a kernel at Landlock ABI abi whose metadata guard probe gives.
func sandboxVerdict(mode string, abi int, probe func() error) string {
	switch mode {
	case sandbox.ModeNone:
		return install.WorkerConfig + ` says "sandbox": "none": plugins and scoped checks run unconfined`
	case "", sandbox.ModeLandlock, sandbox.ModeUnscoped:
		if mode == "" {
			mode = sandbox.ModeLandlock
		}
		switch {
		case abi < 1:
			return "Landlock is not available on this kernel: the Worker refuses to start"
		case !sandbox.Accepts(mode, abi):
			return fmt.Sprintf(`Landlock ABI %d on this kernel is below what "sandbox": %q needs: the Worker refuses to start`, abi, mode)
		case probe() != nil:
			return "the sandbox's metadata guard (seccomp user notification) is not available: the Worker refuses to start"
		case mode == sandbox.ModeUnscoped && !sandbox.Scoped(abi):
			return fmt.Sprintf(`%s says "sandbox": "landlock-unscoped": sandboxed programs can signal the Worker and other processes of its account (Landlock ABI %d here; ABI %d scopes signals)`,
				install.WorkerConfig, abi, sandbox.MinABI)
		case mode == sandbox.ModeUnscoped:
			return fmt.Sprintf(`%s says "sandbox": "landlock-unscoped", which this kernel (Landlock ABI %d) does not need: remove it, or an older kernel runs unscoped`,
				install.WorkerConfig, abi)
		}
		return ""
	}
	return install.WorkerConfig + ` has an invalid "sandbox"`
}

// checkContainment fails unless the Worker's main process runs in the
// leaf cgroup it moves itself into once the cgroup its unit delegates to
// it (Delegate=yes) has proved usable: writable by its account, a cgroup
// created below it and its cgroup.kill found (supervise.DelegatedCgroups).
// Only there does every sandboxed program run in a cgroup of its own that
// the kernel empties when it ends (docs/sandbox.md, "Containment"). It
// reads the main process's /proc/<pid>/cgroup and changes nothing.
func (d *doctor) checkContainment() string {
	cg, err := d.h.Services().MainCgroup(d.ctx, install.WorkerUnit)
	switch {
	case err != nil:
		return install.WorkerUnit + ": " + err.Error()
	case cg == "":
		return "not checked: the Worker unit has no main process"
	case !strings.HasSuffix(cg, "/"+install.WorkerUnit+"/"+supervise.LeafCgroup):
		return "the Worker does not contain its sandboxed programs: its main process is not in the leaf of the cgroup its unit delegates to it"
	}
	return ""
}

// checkUnitDigests requires the receipt's unit digests to be the units
// this release renders, so a unit edited together with its receipt entry
// is caught (when this forge is the installed release; otherwise
// cli-identity fails).
func (d *doctor) checkUnitDigests() string {
	r := d.receipt
	if d.self.Version != r.Version || d.self.Commit != r.Commit {
		return ""
	}
	for _, f := range r.Files {
		for _, u := range []string{install.GateUnit, install.WorkerUnit} {
			if f.Path == install.UnitPath(u) && f.SHA256 != install.UnitDigest(u, r.RunAsRoot) {
				return f.Path + " is not the unit this release installs"
			}
		}
	}
	return ""
}

func first(problems []string) string {
	if len(problems) == 0 {
		return ""
	}
	return problems[0]
}

func (d *doctor) checkReceipt() string {
	fi, err := d.f.Lstat(install.ReceiptPath)
	if err != nil {
		return install.ReceiptPath + " is missing"
	}
	if !fi.Mode().IsRegular() {
		return install.ReceiptPath + " is not a regular file"
	}
	if uid, gid := install.Owner(fi); uid != 0 || gid != 0 || fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0o644 {
		return install.ReceiptPath + " is not root-owned mode 0644"
	}
	r, err := install.ReadReceipt(d.f)
	if err != nil {
		return "the receipt is not strict: " + err.Error()
	}
	d.receipt = r
	return ""
}

// checkState checks the state directories and the database files: the
// service's own, private.
func (d *doctor) checkState() string {
	r := d.receipt
	if s := d.owned(install.GateStateDir, true, 0o700, r.Gate.UID, r.Gate.GID); s != "" {
		return s
	}
	for _, p := range []string{install.WorkerState, install.WorktreeRoot, install.RuntimeRoot, install.RepoRoot} {
		if s := d.owned(p, true, 0o700, r.Worker.UID, r.Worker.GID); s != "" {
			return s
		}
	}
	if s := d.owned(install.Database, false, 0o600, r.Gate.UID, r.Gate.GID); s != "" {
		return s
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		p := install.Database + suffix
		if _, err := d.f.Lstat(p); err == nil {
			if s := d.owned(p, false, 0o600, r.Gate.UID, r.Gate.GID); s != "" {
				return s
			}
		}
	}
	return ""
}

func (d *doctor) owned(p string, dir bool, perm fs.FileMode, uid, gid int) string {
	fi, err := d.f.Lstat(p)
	switch {
	case err != nil:
		return p + " is missing"
	case fi.Mode()&fs.ModeSymlink != 0:
		return p + " is a symlink"
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		return p + " has the wrong object type"
	case fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != perm:
		return p + " has the wrong mode"
	}
	if u, g := install.Owner(fi); u != uid || g != gid {
		return p + " has the wrong owner"
	}
	return ""
}

// checkUnit requires the unit enabled and active, without drop-ins (they
// change the unit past its receipt digest) except the Worker's network
// drop-in exactly as docs/install.md gives it (install.CheckWorkerDropIns),
// which it requires when the configuration needs the network, its main
// process executing the installed binary.
func (d *doctor) checkUnit(unit string) string {
	s := d.h.Services()
	if unit == install.GateUnit {
		if active, err := s.IsActive(d.ctx, unit); err == nil && active {
			d.gateActive = true
		}
	}
	enabled, err := s.IsEnabled(d.ctx, unit)
	if err != nil {
		return unit + ": " + err.Error()
	}
	if !enabled {
		return unit + " is not enabled"
	}
	active, err := s.IsActive(d.ctx, unit)
	if err != nil {
		return unit + ": " + err.Error()
	}
	if !active {
		return unit + " is not active"
	}
	dropIns, err := s.DropIns(d.ctx, unit)
	if err != nil {
		return unit + ": " + err.Error()
	}
	if unit == install.WorkerUnit {
		if p := install.CheckWorkerDropIns(d.f, dropIns); p != "" {
			return p
		}
		if len(dropIns) == 0 {
			if what := d.networkDeclared(); what != "" {
				return what + " but " + install.WorkerDropIn + " is missing: under IPAddressDeny=any the Worker reaches no provider or network_allow host"
			}
		}
	} else if len(dropIns) > 0 {
		return unit + " has drop-ins: " + strings.Join(dropIns, " ")
	}
	want := install.BinDir + "/forge-worker"
	if unit == install.GateUnit {
		want = install.BinDir + "/forge-gate"
	}
	exe, err := s.MainExe(d.ctx, unit)
	if err != nil {
		return unit + ": " + err.Error()
	}
	if exe != want {
		return unit + "'s main process does not execute " + want
	}
	return ""
}

func (d *doctor) gate() (*install.GateClient, error) {
	if d.client != nil {
		return d.client, nil
	}
	token, err := install.OwnerToken(d.f)
	if err != nil {
		return nil, err
	}
	d.client = install.NewGateClient(d.receipt.Listen, token, d.h.Services())
	return d.client, nil
}

func (d *doctor) checkSchema() string {
	if d.receipt.SchemaVersion != d.self.Schema {
		return "the receipt's schema version is not this release's"
	}
	v, err := readSchemaCopy(d.ctx, d.f)
	if err != nil {
		return err.Error()
	}
	if v != d.receipt.SchemaVersion {
		return "the database schema version is not the installed one"
	}
	return ""
}

// networkDeclared names what in the installed configuration needs the
// Worker's network: providers in worker.json, or a network_allow list
// anywhere in gate.json; "" when neither (or a file is unreadable or not
// JSON: the Worker and Gate refuse such a file themselves).
func (d *doctor) networkDeclared() string {
	if b, err := d.f.ReadFile(install.WorkerConfig, 1<<20); err == nil {
		var c struct {
			Providers []json.RawMessage `json:"providers"`
		}
		if json.Unmarshal(b, &c) == nil && len(c.Providers) > 0 {
			return "worker.json declares providers"
		}
	}
	if b, err := d.f.ReadFile(install.GateConfig, 1<<20); err == nil {
		var v any
		if json.Unmarshal(b, &v) == nil && listsNetworkAllow(v, 0) {
			return "gate.json lists network_allow"
		}
	}
	return ""
}

// listsNetworkAllow reports a non-empty "network_allow" array in v, at
// most 32 levels down.
func listsNetworkAllow(v any, depth int) bool {
	if depth > 32 {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if a, ok := e.([]any); k == "network_allow" && ok && len(a) > 0 || listsNetworkAllow(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if listsNetworkAllow(e, depth+1) {
				return true
			}
		}
	}
	return false
}

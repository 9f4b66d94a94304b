package install_test

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/doctor"
	"github.com/0k-lab/agent-forge/pkg/install"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// forge doctor's tests live here, beside the fake machine they need.

const commitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func self() install.Self {
	return install.Self{Version: "v1.0.0", Commit: commitA, Schema: store.SchemaVersion}
}

func installedMachine(t *testing.T) *install.TestEnv {
	e := install.NewTestEnv(t)
	req := install.WriteTestRelease(t, "v1.0.0", commitA)
	req.EnableNow = true
	e.MustInstall(req)
	return e
}

func runDoctor(t *testing.T, e *install.TestEnv, s install.Self) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := doctor.Run(t.Context(), e.TestHost(), s, &out, &errOut)
	return code, out.String(), errOut.String()
}

// report renders the expected stdout: every check PASS except failing.
func report(failing ...string) string {
	var b strings.Builder
	bad := map[string]bool{}
	for _, f := range failing {
		bad[f] = true
	}
	for _, id := range doctor.Checks {
		if bad[id] {
			b.WriteString("FAIL " + id + "\n")
			continue
		}
		b.WriteString("PASS " + id + "\n")
		if agent, ok := strings.CutSuffix(id, "-plugin"); ok {
			// No worker.json of a test machine runs an agent plugin, and
			// no CLI is installed.
			b.WriteString("INFO worker.json does not run it; its CLI " + agent + " (checked against @example/" + agent + "@1.0.0) is not found (" +
				strings.ToUpper(agent) + "_BIN, or " + agent + " in the PATH of " + install.WorkerEnv + ")\n")
		}
	}
	if len(failing) == 0 {
		return b.String() + "RESULT healthy\n"
	}
	return b.String() + "RESULT unhealthy\n"
}

// agentPluginChecks are the doctor's agent plugin check ids.
func agentPluginChecks() []string {
	var ids []string
	for _, p := range install.AgentPlugins() {
		ids = append(ids, strings.TrimPrefix(p, "forge-"))
	}
	return ids
}

// TestDoctorChecksEveryAgentPlugin: one check per shipped agent plugin,
// after worker-containment.
func TestDoctorChecksEveryAgentPlugin(t *testing.T) {
	i := slices.Index(doctor.Checks, "worker-containment")
	want := agentPluginChecks()
	if len(want) < 2 || i < 0 || !slices.Equal(doctor.Checks[i+1:i+1+len(want)], want) ||
		!slices.Contains(want, "claude-plugin") || !slices.Contains(want, "codex-plugin") || !slices.Contains(want, "gemini-plugin") {
		t.Fatalf("checks %v", doctor.Checks)
	}
}

func TestDoctorHealthyAndReadOnly(t *testing.T) {
	e := installedMachine(t)
	before := e.Digest()
	code, out, errOut := runDoctor(t, e, self())
	if code != doctor.ExitHealthy || out != report() || errOut != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if e.Digest() != before {
		t.Fatal("doctor changed the machine (contents, modes, owners or mtimes)")
	}
	token, _ := install.OwnerToken(e.TestHost().FS())
	if strings.Contains(out+errOut, token) {
		t.Fatal("doctor printed the owner token")
	}
}

func TestDoctorUnhealthyCases(t *testing.T) {
	cases := map[string]struct {
		break_  func(e *install.TestEnv)
		self    *install.Self
		failing []string
	}{
		"wrong mode": {break_: func(e *install.TestEnv) {
			os.Chmod(filepath.Join(e.RootDir(), install.BinDir, "forge-gate"), 0o775)
		}, failing: []string{"immutable-files"}},
		"changed binary": {break_: func(e *install.TestEnv) {
			f, _ := os.OpenFile(filepath.Join(e.RootDir(), install.BinDir, "forge-ref-plugin"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("#\n")
			f.Close()
		}, failing: []string{"immutable-files"}},
		"extra file": {break_: func(e *install.TestEnv) {
			os.WriteFile(filepath.Join(e.RootDir(), install.BinDir, "extra"), nil, 0o755)
		}, failing: []string{"immutable-files"}},
		"secret readable": {break_: func(e *install.TestEnv) {
			os.Chmod(filepath.Join(e.RootDir(), install.GateEnv), 0o644)
		}, failing: []string{"mutable-paths", "account-separation"}},
		"database owner": {break_: func(e *install.TestEnv) {
			os.Chown(filepath.Join(e.RootDir(), install.Database), 0, 0)
		}, failing: []string{"mutable-paths"}},
		"writable ancestor": {break_: func(e *install.TestEnv) {
			os.Chmod(filepath.Join(e.RootDir(), "etc"), 0o777)
		}, failing: append([]string{"cli-identity", "ancestors"}, agentPluginChecks()...)},
		"changed agent plugin": {break_: func(e *install.TestEnv) {
			// Never run: its digest is checked first (a run would print
			// the release line and pass).
			f, _ := os.OpenFile(filepath.Join(e.RootDir(), install.BinDir, "forge-claude-plugin"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("#\n")
			f.Close()
		}, failing: []string{"immutable-files", "claude-plugin"}},
		"agent plugin without the handshake": {break_: func(e *install.TestEnv) {
			// A plugin with its receipt digest and the version line that
			// does not answer initialize: only the handshake fails.
			bin := filepath.Join(e.RootDir(), install.BinDir, "forge-claude-plugin")
			data := []byte("#!/bin/sh\necho 'forge-claude-plugin v1.0.0 " + commitA + "'\n")
			os.WriteFile(bin, data, 0o755)
			r, err := install.ReadReceipt(e.TestHost().FS())
			if err != nil {
				t.Fatal(err)
			}
			for i := range r.Files {
				if r.Files[i].Path == install.BinDir+"/forge-claude-plugin" {
					r.Files[i].SHA256 = sha(data)
				}
			}
			os.WriteFile(filepath.Join(e.RootDir(), install.ReceiptPath), r.Encode(), 0o644)
		}, failing: []string{"claude-plugin"}},
		"stopped gate": {break_: func(e *install.TestEnv) { e.SetActive(install.GateUnit, false) },
			failing: []string{"gate-unit", "gate-release", "worker-connected"}},
		"missing worker": {break_: func(e *install.TestEnv) { e.SetActive(install.WorkerUnit, false) },
			failing: []string{"worker-unit", "worker-containment", "worker-connected"}},
		"uncontained worker": {break_: func(e *install.TestEnv) {
			e.SetMainCgroup(install.WorkerUnit, "/system.slice/"+install.WorkerUnit)
		}, failing: []string{"worker-containment"}},
		"sandbox none": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.WorkerConfig)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`{"version":1,`), []byte(`{"version":1,"sandbox":"none",`), 1), 0o600)
		}, failing: []string{"worker-sandbox"}},
		"sandbox landlock-unscoped": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.WorkerConfig)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`{"version":1,`), []byte(`{"version":1,"sandbox":"landlock-unscoped",`), 1), 0o600)
		}, failing: []string{"worker-sandbox"}},
		"state below the floor": {break_: func(e *install.TestEnv) {
			// A floor of 2^50 bytes: more than any test machine has free.
			p := filepath.Join(e.RootDir(), install.GateConfig)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`{"version":1,`), []byte(`{"version":1,"free_space_floor_bytes":1125899906842624,`), 1), 0o600)
		}, failing: []string{"state-space"}},
		"replication without litestream": {break_: func(e *install.TestEnv) {
			withReplication(e, "sync")
		}, failing: []string{"replication"}},
		"replication mode": {break_: func(e *install.TestEnv) {
			withReplication(e, "eventually")
		}, failing: []string{"replication"}},
		"another forge":  {self: &install.Self{Version: "v1.0.1", Commit: commitA, Schema: store.SchemaVersion}, failing: []string{"cli-identity"}},
		"another schema": {self: &install.Self{Version: "v1.0.0", Commit: commitA, Schema: store.SchemaVersion + 1}, failing: []string{"sqlite-schema"}},
		"receipt digest tampered": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.ReceiptPath)
			b, _ := os.ReadFile(p)
			i := bytes.Index(b, []byte(`"sha256": "`)) + len(`"sha256": "`)
			b[i] = "01"[map[bool]int{true: 1}[b[i] == '0']]
			os.Remove(p)
			os.WriteFile(p, b, 0o644)
		}, failing: []string{"cli-identity", "immutable-files"}},
		"unit and receipt changed together": {break_: func(e *install.TestEnv) {
			unit := filepath.Join(e.RootDir(), install.UnitPath(install.GateUnit))
			old, _ := os.ReadFile(unit)
			changed := append(append([]byte{}, old...), "ExecStartPre=/bin/true\n"...)
			os.WriteFile(unit, changed, 0o644)
			p := filepath.Join(e.RootDir(), install.ReceiptPath)
			b, _ := os.ReadFile(p)
			b = bytes.Replace(b, []byte(sha(old)), []byte(sha(changed)), 1)
			os.Remove(p)
			os.WriteFile(p, b, 0o644)
		}, failing: []string{"immutable-files"}},
		"symlink binary": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.BinDir, "forge-worker")
			b, _ := os.ReadFile(p)
			copyPath := filepath.Join(e.RootDir(), "opt", "forge-worker.copy")
			os.WriteFile(copyPath, b, 0o755)
			os.Remove(p)
			os.Symlink(copyPath, p)
		}, failing: []string{"immutable-files"}},
		"symlink bin dir": {break_: func(e *install.TestEnv) {
			bin := filepath.Join(e.RootDir(), install.BinDir)
			os.Rename(bin, bin+".real")
			os.Symlink(bin+".real", bin)
		}, failing: []string{"immutable-files"}},
		"changed unit": {break_: func(e *install.TestEnv) {
			f, _ := os.OpenFile(filepath.Join(e.RootDir(), install.UnitPath(install.WorkerUnit)), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("# edited\n")
			f.Close()
		}, failing: []string{"immutable-files"}},
		"extra file in prefix": {break_: func(e *install.TestEnv) {
			os.WriteFile(filepath.Join(e.RootDir(), install.Prefix, "notes"), nil, 0o644)
		}, failing: []string{"immutable-files"}},
		"config symlink": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.WorkerConfig)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		}, failing: []string{"mutable-paths", "worker-sandbox"}},
		"world-readable stray wal": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.Database+"-wal")
			os.WriteFile(p, nil, 0o644)
			os.Chmod(p, 0o644)
		}, failing: []string{"mutable-paths", "account-separation", "sqlite-schema"}},
		"lone wal": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.Database+"-wal")
			os.WriteFile(p, nil, 0o600)
			fi, _ := os.Stat(filepath.Join(e.RootDir(), install.Database))
			uid, gid := install.Owner(fi)
			os.Chown(p, uid, gid)
		}, failing: []string{"sqlite-schema"}},
		"tampered forge never runs": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.BinDir, "forge")
			os.WriteFile(p, []byte("#!/bin/sh\ntouch "+filepath.Join(e.RootDir(), "ran")+"\necho 'forge v1.0.0 "+commitA+"'\n"), 0o755)
		}, failing: []string{"cli-identity", "immutable-files"}},
		"state root 0777": {break_: func(e *install.TestEnv) {
			os.Chmod(filepath.Join(e.RootDir(), install.StateRoot), 0o777)
		}, failing: []string{"ancestors"}},
		"state root owned by the gate": {break_: func(e *install.TestEnv) {
			os.Chown(filepath.Join(e.RootDir(), install.StateRoot), 990, 990)
		}, failing: []string{"ancestors"}},
		"state root symlink": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.StateRoot)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		}, failing: []string{"ancestors"}},
		"gate state readable by the worker": {break_: func(e *install.TestEnv) {
			os.Chmod(filepath.Join(e.RootDir(), install.GateStateDir), 0o755)
		}, failing: []string{"mutable-paths", "account-separation"}},
		"worker account replaced": {break_: func(e *install.TestEnv) {
			e.SetAccount(install.WorkerAccount, install.AccountInfo{UID: 991, GID: 991, Group: install.WorkerAccount, Members: []string{install.GateAccount}})
		}, failing: []string{"account-separation"}},
		"gate drop-in": {break_: func(e *install.TestEnv) {
			e.SetDropIns(install.GateUnit, []string{"/etc/systemd/system/agent-forge-gate.service.d/x.conf"})
		}, failing: []string{"gate-unit"}},
		"worker runs another binary": {break_: func(e *install.TestEnv) {
			e.SetMainExe(install.WorkerUnit, install.BinDir+"/forge-worker (deleted)")
		}, failing: []string{"worker-unit"}},
		"no receipt": {break_: func(e *install.TestEnv) {
			os.Remove(filepath.Join(e.RootDir(), install.ReceiptPath))
		}, failing: doctor.Checks},
		"loose receipt": {break_: func(e *install.TestEnv) {
			p := filepath.Join(e.RootDir(), install.ReceiptPath)
			b, _ := os.ReadFile(p)
			os.Remove(p)
			os.WriteFile(p, append(b[:len(b)-2], []byte(`,"extra":1}`+"\n")...), 0o644)
		}, failing: doctor.Checks},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := installedMachine(t)
			if c.break_ != nil {
				c.break_(e)
			}
			s := self()
			if c.self != nil {
				s = *c.self
			}
			before := e.Digest()
			code, out, errOut := runDoctor(t, e, s)
			if code != doctor.ExitUnhealthy || out != report(c.failing...) {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if lines := strings.Count(errOut, "\n"); lines != len(c.failing) || !strings.HasPrefix(errOut, "forge doctor: FAIL ") {
				t.Fatalf("reasons %q", errOut)
			}
			if e.Digest() != before {
				t.Fatal("doctor changed the machine")
			}
			if _, err := os.Stat(filepath.Join(e.RootDir(), "ran")); err == nil {
				t.Fatal("doctor executed a tampered forge")
			}
		})
	}
}

// Doctor sends the owner token only to the Gate unit's main process: an
// impostor on the port fails the authenticated checks and never sees it.
func TestDoctorNeverSendsTheTokenToAnImpostor(t *testing.T) {
	e := installedMachine(t)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	e.SetImpostor(sleep.Process.Pid)
	code, out, errOut := runDoctor(t, e, self())
	if code != doctor.ExitUnhealthy || out != report("gate-release", "worker-connected") || !strings.Contains(errOut, "not the Gate unit's main process") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if e.AuthSeen() != 0 {
		t.Fatal("the owner token reached the impostor")
	}
}

// With the Gate's database open (a running Gate: -wal and -shm exist),
// doctor leaves every file as it was, the -shm wal-index included.
func TestDoctorLeavesALiveDatabaseAlone(t *testing.T) {
	e := installedMachine(t)
	db := filepath.Join(e.RootDir(), install.Database)
	dir := filepath.Dir(db)
	fi, _ := os.Stat(db)
	uid, gid := install.Owner(fi)
	// The store opens only a database its own user owns: open it as root,
	// then hand everything back to the Gate account.
	os.Chown(dir, 0, 0)
	os.Chown(db, 0, 0)
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A second connection leaves frames in the WAL (no checkpoint), as a
	// busy Gate does.
	raw, err := sql.Open("sqlite", db+"?_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("CREATE TABLE doctor_probe(x); INSERT INTO doctor_probe VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, db, db + "-wal", db + "-shm"} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatalf("with the store open: %v", err)
		}
	}
	before := e.Digest()
	code, out, errOut := runDoctor(t, e, self())
	if code != doctor.ExitHealthy {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if e.Digest() != before {
		t.Fatal("doctor changed the live database's files")
	}
}

// replicaSocket is where the tests' gate.json puts Litestream's socket.
const replicaSocket = "/run/agent-forge-litestream/litestream.sock"

// withReplication sets gate.json's replication to mode with replicaSocket.
func withReplication(e *install.TestEnv, mode string) {
	p := filepath.Join(e.RootDir(), install.GateConfig)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte(`{"version":1,`),
		[]byte(`{"version":1,"replication":"`+mode+`","replication_socket":"`+replicaSocket+`",`), 1), 0o600)
}

// TestDoctorReplication: with replication on and a real Litestream
// replicating the Gate's database, the replication check passes and notes
// the mode, the lag and the replica's last confirmed sync; once Litestream
// is gone it fails.
func TestDoctorReplication(t *testing.T) {
	bin, err := exec.LookPath("litestream")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("litestream is not installed (.ci/run installs it)")
		}
		t.Skip("litestream is not installed")
	}
	e := installedMachine(t)
	withReplication(e, "async")
	sock := filepath.Join(e.RootDir(), replicaSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "litestream.yml")
	os.WriteFile(cfg, []byte("socket:\n  enabled: true\n  path: "+sock+"\n  permissions: 0600\ndbs:\n  - path: "+
		filepath.Join(e.RootDir(), install.Database)+"\n    replica:\n      type: file\n      path: "+filepath.Join(t.TempDir(), "replica")+"\n"), 0o600)
	cmd := exec.Command(bin, "replicate", "-config", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
			stopped = true
		}
	}
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	var out, errOut string
	for {
		var code int
		code, out, errOut = runDoctor(t, e, self())
		if code == doctor.ExitHealthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("doctor never healthy with litestream running:\n%s%s", out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	info := regexp.MustCompile(`(?m)^INFO replication mode=async status=replicating lag_seconds=[0-9]+\.[0-9]{3} replica_last_sync=20[0-9-]+T[0-9:.]+Z$`)
	if !info.MatchString(out) || !strings.Contains(out, "PASS replication\nINFO replication ") {
		t.Fatalf("no replication figures:\n%s", out)
	}
	stop()
	code, out, errOut := runDoctor(t, e, self())
	if code != doctor.ExitUnhealthy || !strings.Contains(out, "FAIL replication\n") || !strings.Contains(errOut, "FAIL replication: replication async: Litestream's control socket") {
		t.Fatalf("doctor without litestream: exit %d\n%s%s", code, out, errOut)
	}
}

// TestDoctorReportsTheAgentCLI: an agent plugin worker.json runs fails its
// check while its CLI is missing, and passes once the Worker's environment
// names one; each check says where the CLI is and which release the
// adapter was checked against.
func TestDoctorReportsTheAgentCLI(t *testing.T) {
	e := installedMachine(t)
	plugin := install.BinDir + "/forge-gemini-plugin"
	wc := filepath.Join(e.RootDir(), install.WorkerConfig)
	b, _ := os.ReadFile(wc)
	os.WriteFile(wc, bytes.Replace(b, []byte(`"plugins":[`), []byte(`"plugins":[{"id":"gemini","argv":["`+plugin+`"]},`), 1), 0o600)
	code, out, errOut := runDoctor(t, e, self())
	if code != doctor.ExitUnhealthy ||
		!strings.Contains(out, "FAIL gemini-plugin\nINFO worker.json runs it; its CLI gemini (checked against @example/gemini@1.0.0) is not found (GEMINI_BIN") ||
		!strings.Contains(errOut, "worker.json runs "+plugin+" but its CLI gemini is not found") || strings.Contains(out, "FAIL claude-plugin") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	os.WriteFile(filepath.Join(e.RootDir(), "opt", "gemini"), []byte("#!/bin/sh\n"), 0o755)
	f, err := os.OpenFile(filepath.Join(e.RootDir(), install.WorkerEnv), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("GEMINI_BIN=/opt/gemini\n")
	f.Close()
	code, out, errOut = runDoctor(t, e, self())
	if code != doctor.ExitHealthy || !strings.Contains(out, "PASS gemini-plugin\nINFO worker.json runs it; its CLI gemini (checked against @example/gemini@1.0.0) is found at /opt/gemini\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// writeWorkerDropIn writes a drop-in for the Worker unit at p (root-owned,
// mode 0644, in a 0755 directory) and makes it the unit's only one.
func writeWorkerDropIn(t *testing.T, e *install.TestEnv, p, text string) {
	t.Helper()
	real := filepath.Join(e.RootDir(), p)
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	e.SetDropIns(install.WorkerUnit, []string{p})
}

// editConfig rewrites an installed configuration file in place (owner and
// mode kept), replacing its first old with new.
func editConfig(t *testing.T, e *install.TestEnv, p, old, new string) {
	t.Helper()
	real := filepath.Join(e.RootDir(), p)
	b, err := os.ReadFile(real)
	if err != nil || !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q", p, old)
	}
	if err := os.WriteFile(real, bytes.Replace(b, []byte(old), []byte(new), 1), 0); err != nil {
		t.Fatal(err)
	}
}

func declareProviders(t *testing.T, e *install.TestEnv) {
	editConfig(t, e, install.WorkerConfig, `"repositories":[],`, `"providers":[{"id":"openai"}],"repositories":[],`)
}

func declareNetworkAllow(t *testing.T, e *install.TestEnv) {
	editConfig(t, e, install.GateConfig, `"default_execution":{`, `"default_execution":{"network_allow":["registry.npmjs.org:443"],`)
}

// The Worker unit takes exactly one drop-in, the one docs/install.md
// gives for providers and network_allow, and needs it when the
// configuration declares either; any other drop-in, or that one changed,
// fails worker-unit.
func TestDoctorWorkerNetworkDropIn(t *testing.T) {
	other := install.UnitDir + "/" + install.WorkerUnit + ".d/other.conf"
	cases := map[string]struct {
		set    func(t *testing.T, e *install.TestEnv)
		reason string // "" when healthy
	}{
		"providers with the drop-in": {set: func(t *testing.T, e *install.TestEnv) {
			declareProviders(t, e)
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
		}},
		"network_allow with the drop-in": {set: func(t *testing.T, e *install.TestEnv) {
			declareNetworkAllow(t, e)
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
		}},
		"the drop-in without a need": {set: func(t *testing.T, e *install.TestEnv) {
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
		}},
		"providers without the drop-in": {set: declareProviders,
			reason: "worker.json declares providers but " + install.WorkerDropIn + " is missing"},
		"network_allow without the drop-in": {set: declareNetworkAllow,
			reason: "gate.json lists network_allow but " + install.WorkerDropIn + " is missing"},
		"the drop-in loosening more": {set: func(t *testing.T, e *install.TestEnv) {
			declareProviders(t, e)
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText+"ProtectHome=no\n")
		}, reason: install.WorkerDropIn + " is not the drop-in docs/install.md gives"},
		"the drop-in edited": {set: func(t *testing.T, e *install.TestEnv) {
			declareProviders(t, e)
			writeWorkerDropIn(t, e, install.WorkerDropIn, strings.Replace(install.WorkerDropInText, "IPAddressDeny=", "IPAddressAllow=any", 1))
		}, reason: install.WorkerDropIn + " is not the drop-in docs/install.md gives"},
		"the same text under another name": {set: func(t *testing.T, e *install.TestEnv) {
			declareProviders(t, e)
			writeWorkerDropIn(t, e, other, install.WorkerDropInText)
		}, reason: "has drop-ins other than " + install.WorkerDropIn + ": " + other},
		"another drop-in beside it": {set: func(t *testing.T, e *install.TestEnv) {
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
			e.SetDropIns(install.WorkerUnit, []string{install.WorkerDropIn, other})
		}, reason: "has drop-ins other than"},
		"the drop-in group-writable": {set: func(t *testing.T, e *install.TestEnv) {
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
			os.Chmod(filepath.Join(e.RootDir(), install.WorkerDropIn), 0o664)
		}, reason: install.WorkerDropIn + " is not a root-owned regular file only root can write"},
		"the drop-in owned by the worker": {set: func(t *testing.T, e *install.TestEnv) {
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
			os.Lchown(filepath.Join(e.RootDir(), install.WorkerDropIn), 991, 991)
		}, reason: install.WorkerDropIn + " is not a root-owned regular file only root can write"},
		"the drop-in a symlink": {set: func(t *testing.T, e *install.TestEnv) {
			writeWorkerDropIn(t, e, install.WorkerDropIn+".real", install.WorkerDropInText)
			os.Symlink("providers.conf.real", filepath.Join(e.RootDir(), install.WorkerDropIn))
			e.SetDropIns(install.WorkerUnit, []string{install.WorkerDropIn})
		}, reason: install.WorkerDropIn + " is not a root-owned regular file"},
		"the drop-in directory writable by others": {set: func(t *testing.T, e *install.TestEnv) {
			writeWorkerDropIn(t, e, install.WorkerDropIn, install.WorkerDropInText)
			os.Chmod(filepath.Dir(filepath.Join(e.RootDir(), install.WorkerDropIn)), 0o777)
		}, reason: "is not a root-owned directory only root can write"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := installedMachine(t)
			c.set(t, e)
			before := e.Digest()
			code, out, errOut := runDoctor(t, e, self())
			if c.reason == "" {
				if code != doctor.ExitHealthy || out != report() || errOut != "" {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
			} else if code != doctor.ExitUnhealthy || out != report("worker-unit") || !strings.Contains(errOut, c.reason) {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if e.Digest() != before {
				t.Fatal("doctor changed the machine")
			}
		})
	}
}

// docs/install.md gives the Worker's drop-in with the path and bytes
// forge doctor accepts.
func TestInstallDocGivesTheWorkerDropIn(t *testing.T) {
	b, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("```\n# "+install.WorkerDropIn+"\n"+install.WorkerDropInText+"```\n")) {
		t.Fatal("docs/install.md does not show " + install.WorkerDropIn + " as forge doctor accepts it")
	}
}

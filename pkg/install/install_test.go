package install

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/store"
)

var (
	v1 = releaseOpt{version: "v1.0.0", commit: commitOf('a')}
	v2 = releaseOpt{version: "v1.1.0", commit: commitOf('b')}
)

func (e *env) arm(k int) { e.h.f.mu.Lock(); e.h.f.n, e.h.f.at, e.h.f.hit = 0, k, ""; e.h.f.mu.Unlock() }

func TestFreshInstallLayoutAndValidationOnlyRerun(t *testing.T) {
	e := newEnv(t)
	req := writeRelease(t, v1)
	e.mustRun(req)
	r, err := ReadReceipt(e.h.fs)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "v1.0.0" || r.Gate != (Identity{990, 990}) || r.Worker != (Identity{991, 991}) || r.RunAsRoot {
		t.Fatalf("receipt %+v", r)
	}
	if p := append(CheckImmutable(e.h.fs, r), CheckMutable(e.h.fs, r)...); len(p) > 0 {
		t.Fatalf("fresh install fails its own checks: %v", p)
	}
	gateEnv, _ := os.ReadFile(filepath.Join(e.root, GateEnv))
	workerEnv, _ := os.ReadFile(filepath.Join(e.root, WorkerEnv))
	owner, _ := OwnerToken(e.h.fs)
	worker := strings.TrimSuffix(strings.TrimPrefix(string(workerEnv), WorkerTokenEnv+"="), "\n")
	if !ident.ValidToken(owner) || !ident.ValidToken(worker) || owner == worker || strings.Contains(string(workerEnv), owner) ||
		!strings.Contains(string(gateEnv), WorkerTokenEnv+"="+worker+"\n") {
		t.Fatal("tokens are not isolated 64-hex values")
	}
	for _, p := range []string{GateConfig, WorkerConfig, ReceiptPath, UnitPath(GateUnit)} {
		b, _ := os.ReadFile(filepath.Join(e.root, p))
		if strings.Contains(string(b), owner) || strings.Contains(string(b), worker) {
			t.Fatalf("%s holds a token", p)
		}
	}
	if len(e.h.svc.active) != 0 || len(e.h.svc.enabled) != 0 || e.h.svc.reloads != 0 {
		t.Fatal("a plain install touched services")
	}
	before := e.digest()
	if err, out := e.run(req); err != nil || !strings.Contains(out, "nothing changed") {
		t.Fatalf("re-run: %v %q", err, out)
	}
	if e.digest() != before {
		t.Fatal("validation-only re-run changed the tree")
	}
	// A drifted installation is refused, never repaired.
	bin := filepath.Join(e.root, BinDir, "forge-worker")
	os.Chmod(bin, 0o775)
	drifted := e.digest()
	wantCode(t, func() error { err, _ := e.run(req); return err }(), ExitRefused)
	if e.digest() != drifted {
		t.Fatal("refused re-run changed the tree")
	}
}

func TestRunAsRootInstallsWithoutAnAccount(t *testing.T) {
	e := newEnv(t)
	req := writeRelease(t, v1)
	req.RunAsRoot = true
	e.mustRun(req)
	r, err := ReadReceipt(e.h.fs)
	if err != nil || !r.RunAsRoot || r.Gate.UID != 0 || r.Worker.UID != 0 {
		t.Fatalf("receipt %+v %v", r, err)
	}
	if len(e.h.acc.users) != 0 {
		t.Fatal("--run-as-root created the account")
	}
	unit, _ := os.ReadFile(filepath.Join(e.root, UnitPath(GateUnit)))
	if strings.Contains(string(unit), "User=") {
		t.Fatal("root unit names a user")
	}
	req.RunAsRoot = false
	wantCode(t, func() error { err, _ := e.run(req); return err }(), ExitRefused)
}

// Every mutating step of a fresh --enable-now install fails once in turn;
// each failure restores the empty machine exactly.
func TestFreshInstallFailureAtEveryStepRestoresExactly(t *testing.T) {
	e := newEnv(t)
	req := writeRelease(t, v1)
	req.EnableNow = true
	empty, emptyState := e.digest(), e.state()
	steps := 0
	for k := 1; ; k++ {
		e.arm(k)
		err, out := e.run(req)
		if e.h.f.hit == "" {
			if err != nil {
				t.Fatalf("unfaulted run failed: %v", err)
			}
			break
		}
		if err == nil {
			// Only the final cleanup of staging leftovers may fail without
			// failing the run, and it says so.
			if !strings.HasPrefix(e.h.f.hit, "remove ") || !strings.Contains(out, "warning: could not remove") {
				t.Fatalf("fault %d (%s) ignored", k, e.h.f.hit)
			}
			break
		}
		steps++
		ie := wantCode(t, err, ExitRefused)
		if ie.Stage == "" {
			t.Fatal("no stage")
		}
		if got := e.digest(); got != empty {
			t.Fatalf("fault %d (%s, stage %s): tree differs after rollback:\n%s", k, e.h.f.hit, ie.Stage, got)
		}
		if got := e.state(); got != emptyState {
			t.Fatalf("fault %d (%s): state %s", k, e.h.f.hit, got)
		}
	}
	if steps < 30 {
		t.Fatalf("only %d mutating steps", steps)
	}
	e.arm(0)
	if !e.h.svc.active[GateUnit] || !e.h.svc.active[WorkerUnit] || !e.h.svc.enabled[WorkerUnit] {
		t.Fatalf("services after install: %s", e.state())
	}
}

func installed(t *testing.T, req Request) *env {
	e := newEnv(t)
	req.EnableNow = true
	e.mustRun(req)
	return e
}

// Every mutating step of an upgrade fails once in turn; each failure
// restores the previous files exactly and the previous release serves.
func TestUpgradeFailureAtEveryStepRestoresExactly(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	up := writeRelease(t, v2)
	up.Upgrade, up.EnableNow = true, true
	before, beforeState := e.digest(), e.state()
	steps := 0
	for k := 1; ; k++ {
		e.arm(k)
		err, out := e.run(up)
		if e.h.f.hit == "" {
			if err != nil {
				t.Fatalf("unfaulted upgrade failed: %v", err)
			}
			break
		}
		if err == nil {
			// Only the final cleanup of staging leftovers may fail without
			// failing the run, and it says so.
			if !strings.HasPrefix(e.h.f.hit, "remove ") || !strings.Contains(out, "warning: could not remove") {
				t.Fatalf("fault %d (%s) ignored", k, e.h.f.hit)
			}
			break
		}
		steps++
		ie := wantCode(t, err, ExitRefused)
		if got := e.digest(); got != before {
			t.Fatalf("fault %d (%s, stage %s): tree differs after rollback", k, e.h.f.hit, ie.Stage)
		}
		if got := e.state(); got != beforeState {
			t.Fatalf("fault %d (%s): state %s, want %s", k, e.h.f.hit, got, beforeState)
		}
	}
	if steps < 15 {
		t.Fatalf("only %d mutating steps", steps)
	}
	r, _ := ReadReceipt(e.h.fs)
	if r.Version != "v1.1.0" || !strings.HasPrefix(e.h.svc.serving, "v1.1.0 ") {
		t.Fatalf("after upgrade: %+v %s", r, e.state())
	}
	// The configuration and secrets stayed.
	if p := CheckMutable(e.h.fs, r); len(p) > 0 {
		t.Fatal(p)
	}
}

func TestUpgradeReadinessFailureRestoresThePreviousRelease(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	tokenBefore, _ := OwnerToken(e.h.fs)
	up := writeRelease(t, v2)
	up.Upgrade, up.EnableNow = true, true
	before, beforeState := e.digest(), e.state()
	e.h.svc.badReady["v1.1.0"] = true
	ie := wantCode(t, func() error { err, _ := e.run(up); return err }(), ExitRefused)
	if ie.Stage != "readiness" {
		t.Fatalf("stage %s", ie.Stage)
	}
	if e.digest() != before || e.state() != beforeState {
		t.Fatalf("not restored: %s", e.state())
	}
	if tok, _ := OwnerToken(e.h.fs); tok != tokenBefore {
		t.Fatal("token rotated")
	}
}

// With both services stopped by the operator, a failed upgrade restores
// the previous unit files and systemd's view of them (daemon-reload), and
// leaves the services stopped.
func TestUpgradeRollbackWithStoppedServicesReloadsTheRestoredUnits(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	for _, u := range []string{WorkerUnit, GateUnit} {
		if err := e.h.svc.Stop(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	up := with(writeRelease(t, v2), true, true)
	before, beforeState := e.digest(), e.state()
	e.h.svc.badReady["v1.1.0"] = true
	ie := wantCode(t, func() error { err, _ := e.run(up); return err }(), ExitRefused)
	if ie.Stage != "readiness" {
		t.Fatalf("stage %s (%s)", ie.Stage, ie.Msg)
	}
	if e.digest() != before || e.state() != beforeState {
		t.Fatalf("not restored: %s, want %s", e.state(), beforeState)
	}
}

// An upgrade that reads the installation, then waits while another
// installer upgrades it, is refused once it holds the lock: it never acts
// on what it read before.
func TestUpgradeRereadsTheReceiptUnderTheLock(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	mid := with(writeRelease(t, v2), true, true)
	late := with(writeRelease(t, releaseOpt{version: "v1.2.0", commit: commitOf('c')}), true, true)
	e.h.f.beforeLock = func() {
		e.h.f.beforeLock = nil
		e.mustRun(mid)
	}
	ie := wantCode(t, func() error { err, _ := e.run(late); return err }(), ExitRefused)
	if ie.Stage != "lock" {
		t.Fatalf("stage %s (%s)", ie.Stage, ie.Msg)
	}
	r, _ := ReadReceipt(e.h.fs)
	if r.Version != "v1.1.0" {
		t.Fatalf("installed %s", r.Version)
	}
}

// A rollback that cannot complete is exit 3 and names what to inspect.
func TestUnrestorableUpgradeIsExitThree(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	up := writeRelease(t, v2)
	up.Upgrade, up.EnableNow = true, true
	// Neither the new Gate nor, after the rollback, the previous one
	// becomes ready, so the previous services cannot be re-proved.
	e.h.svc.badReady["v1.1.0"] = true
	e.h.svc.badReady["v1.0.0"] = true
	ie := wantCode(t, func() error { err, _ := e.run(up); return err }(), ExitUnrestored)
	if !strings.Contains(ie.Msg, "inspect") || !strings.Contains(ie.Msg, GateUnit) {
		t.Fatalf("message %q", ie.Msg)
	}
}

func TestRefusalsChangeNothing(t *testing.T) {
	e := installed(t, writeRelease(t, v2))
	older := writeRelease(t, v1)
	same := writeRelease(t, v2)
	newer := writeRelease(t, releaseOpt{version: "v1.2.0", commit: commitOf('c')})
	cases := map[string]struct {
		req   Request
		self  *Self
		stage string
	}{
		"downgrade":              {req: with(older, true, true), stage: "preflight"},
		"same-version upgrade":   {req: with(same, true, true), stage: "preflight"},
		"upgrade without enable": {req: with(newer, true, false), stage: "preflight"},
		"implicit replacement":   {req: with(newer, false, true), stage: "preflight"},
		"older schema":           {req: with(newer, true, true), self: &Self{Version: "v1.2.0", Commit: commitOf('c'), Schema: store.SchemaVersion - 1}, stage: "preflight"},
		"tampered sums":          {req: func() Request { r := with(newer, true, true); r.SumsSHA256 = strings.Repeat("0", 64); return r }(), stage: "trust"},
		"extra archive": {req: with(writeRelease(t, releaseOpt{version: "v1.2.0", commit: commitOf('c'), sums: func(l []string) []string {
			return append(l, strings.Repeat("1", 64)+"  agent-forge-worker_v1.2.0_darwin_arm64.tar.gz")
		}}), true, true), stage: "manifest"},
		"symlink member": {req: with(writeRelease(t, releaseOpt{version: "v1.2.0", commit: commitOf('c'), mutate: func(kind string, ms []tarMember) []tarMember {
			if kind == "gate" {
				ms[1].hdr.Typeflag, ms[1].hdr.Linkname, ms[1].hdr.Size, ms[1].data = tar.TypeSymlink, "/bin/sh", 0, nil
			}
			return ms
		}}), true, true), stage: "archive"},
		"dotdot member": {req: with(writeRelease(t, releaseOpt{version: "v1.2.0", commit: commitOf('c'), mutate: func(kind string, ms []tarMember) []tarMember {
			if kind == "cli" {
				ms[1].hdr.Name = "../forge"
			}
			return ms
		}}), true, true), stage: "archive"},
		"wrong identity": {req: with(writeRelease(t, releaseOpt{version: "v1.2.0", commit: commitOf('c'), mutate: func(kind string, ms []tarMember) []tarMember {
			if kind == "worker" {
				ms[3].data = []byte("#!/bin/sh\necho 'forge-worker v9.9.9 " + commitOf('c') + "'\n")
				ms[3].hdr.Size = int64(len(ms[3].data))
			}
			return ms
		}}), true, true), stage: "stage"},
	}
	before, beforeState := e.digest(), e.state()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			self := Self{Version: c.req.Version, Commit: c.req.Commit, Schema: store.SchemaVersion}
			if c.self != nil {
				self = *c.self
			}
			var out strings.Builder
			err := Run(t.Context(), e.h, e.layout, self, c.req, &out)
			ie := wantCode(t, err, ExitRefused)
			if ie.Stage != c.stage {
				t.Fatalf("stage %s (%s), want %s", ie.Stage, ie.Msg, c.stage)
			}
			if e.digest() != before || e.state() != beforeState {
				t.Fatal("a refusal changed something")
			}
		})
	}
	// A concurrent upgrade: the lock is held.
	release, _, err := e.h.fs.osFS.Lock(LockPath)
	if err != nil {
		t.Fatal(err)
	}
	ie := wantCode(t, func() error { err, _ := e.run(with(newer, true, true)); return err }(), ExitRefused)
	release()
	if ie.Stage != "lock" || e.digest() != before || e.state() != beforeState {
		t.Fatalf("locked upgrade: %v", ie)
	}
	// Another release's forge binary is a usage error.
	var out strings.Builder
	err = Run(t.Context(), e.h, e.layout, Self{Version: "v1.1.0", Commit: commitOf('b'), Schema: store.SchemaVersion}, with(newer, true, true), &out)
	wantCode(t, err, ExitUsage)
}

func with(r Request, upgrade, enable bool) Request {
	r.Upgrade, r.EnableNow = upgrade, enable
	return r
}

func TestFreshInstallRefusesLeftovers(t *testing.T) {
	e := newEnv(t)
	req := writeRelease(t, v1)
	os.Mkdir(filepath.Join(e.root, ConfigDir), 0o755)
	before := e.digest()
	ie := wantCode(t, func() error { err, _ := e.run(req); return err }(), ExitRefused)
	if ie.Stage != "preflight" || e.digest() != before {
		t.Fatalf("%v", ie)
	}
	os.Remove(filepath.Join(e.root, ConfigDir))
	os.Chmod(filepath.Join(e.root, "opt"), 0o777)
	ie = wantCode(t, func() error { err, _ := e.run(req); return err }(), ExitRefused)
	if !strings.Contains(ie.Msg, "untrusted ancestor") {
		t.Fatalf("%v", ie)
	}
}

// A destination that appears after preflight is never replaced: the
// publication is refused (renameat2 RENAME_NOREPLACE), everything the run
// did is undone, and the newcomer is left as it was.
func TestPublicationNeverReplacesANewcomer(t *testing.T) {
	for _, dest := range []string{ConfigDir, UnitPath(GateUnit), Prefix} {
		t.Run(dest, func(t *testing.T) {
			e := newEnv(t)
			req := writeRelease(t, v1)
			e.h.f.beforeRename = func(to string) {
				if to == dest {
					os.WriteFile(filepath.Join(e.root, dest), []byte("newcomer\n"), 0o600)
					e.h.f.beforeRename = nil
				}
			}
			ie := wantCode(t, func() error { err, _ := e.run(req); return err }(), ExitRefused)
			if ie.Stage != "publish" || !strings.Contains(ie.Msg, "already exists") {
				t.Fatalf("%v", ie)
			}
			b, err := os.ReadFile(filepath.Join(e.root, dest))
			if err != nil || string(b) != "newcomer\n" {
				t.Fatal("the newcomer was replaced")
			}
			os.Remove(filepath.Join(e.root, dest))
			fresh := newEnv(t)
			if e.digest() != fresh.digest() {
				t.Fatal("the refused run left something behind")
			}
		})
	}
}

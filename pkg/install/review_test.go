package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// The review's findings (issue 27), each at the mechanism.

// An interrupt (the signal context cancelled) during the readiness wait of
// a fresh install ends like a readiness failure: exit 2 and the empty
// machine exactly, because rollback never reuses the cancelled context.
func TestInterruptDuringFreshReadinessRestoresExactly(t *testing.T) {
	for _, unit := range []string{GateUnit, WorkerUnit} {
		t.Run(unit, func(t *testing.T) {
			e := newEnv(t)
			req := with(writeRelease(t, v1), false, true)
			empty, emptyState := e.digest(), e.state()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			e.h.svc.onStart = func(u string) {
				if u == unit {
					cancel()
				}
			}
			var out strings.Builder
			err := Run(ctx, e.h, e.layout, Self{Version: req.Version, Commit: req.Commit, Schema: store.SchemaVersion}, req, &out)
			ie := wantCode(t, err, ExitRefused)
			if !strings.Contains(ie.Msg, "interrupted") {
				t.Fatalf("message %q", ie.Msg)
			}
			if e.digest() != empty || e.state() != emptyState {
				t.Fatalf("not restored: %s", e.state())
			}
		})
	}
}

func TestInterruptDuringUpgradeReadinessRestoresThePreviousRelease(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	up := with(writeRelease(t, v2), true, true)
	before, beforeState := e.digest(), e.state()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e.h.svc.onStart = func(u string) {
		if u == GateUnit && strings.HasPrefix(e.h.svc.serving, "v1.1.0 ") {
			cancel()
		}
	}
	var out strings.Builder
	err := Run(ctx, e.h, e.layout, Self{Version: up.Version, Commit: up.Commit, Schema: store.SchemaVersion}, up, &out)
	wantCode(t, err, ExitRefused)
	if e.digest() != before || e.state() != beforeState || !strings.HasPrefix(e.h.svc.serving, "v1.0.0 ") {
		t.Fatalf("not restored: %s", e.state())
	}
}

// otherProcess starts a process that holds none of the listener's sockets
// and returns its pid.
func otherProcess(t *testing.T) int {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// Whatever listens on the Gate's port while the Gate unit's main process
// does not hold that connection never receives the owner token, and its
// answers prove nothing: the upgrade fails at readiness and rolls back.
func TestImpostorOnTheGatePortDuringUpgradeIsRefused(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	up := with(writeRelease(t, v2), true, true)
	before, beforeState := e.digest(), e.state()
	other := otherProcess(t)
	// The new Gate "starts", but someone else answers on its port.
	e.h.svc.onStart = func(u string) {
		e.h.svc.mu.Lock()
		defer e.h.svc.mu.Unlock()
		if u == GateUnit {
			if strings.HasPrefix(e.h.svc.serving, "v1.1.0 ") {
				e.h.svc.impostor = other
			} else {
				e.h.svc.impostor = 0
			}
		}
	}
	ie := wantCode(t, func() error { err, _ := e.run(up); return err }(), ExitRefused)
	if ie.Stage != "readiness" || !strings.Contains(ie.Msg, "not the Gate unit's main process") {
		t.Fatalf("%v", ie)
	}
	if e.h.svc.authSeen != 0 {
		t.Fatalf("the owner token reached the impostor %d times", e.h.svc.authSeen)
	}
	if e.digest() != before || e.state() != beforeState {
		t.Fatalf("not restored: %s", e.state())
	}
}

// A same-version re-run compares the mutable paths with the receipt too.
func TestRerunRefusesDriftedConfiguration(t *testing.T) {
	cases := map[string]func(root string){
		"gate.env 0644":        func(root string) { os.Chmod(filepath.Join(root, GateEnv), 0o644) },
		"gate.env missing":     func(root string) { os.Remove(filepath.Join(root, GateEnv)) },
		"config dir 0777":      func(root string) { os.Chmod(filepath.Join(root, ConfigDir), 0o777) },
		"state root 0777":      func(root string) { os.Chmod(filepath.Join(root, StateRoot), 0o777) },
		"worker.json by other": func(root string) { os.Chown(filepath.Join(root, WorkerConfig), 0, 990) },
	}
	for name, drift := range cases {
		t.Run(name, func(t *testing.T) {
			e := installed(t, writeRelease(t, v1))
			drift(e.root)
			before := e.digest()
			ie := wantCode(t, func() error { err, _ := e.run(writeRelease(t, v1)); return err }(), ExitRefused)
			if ie.Stage != "preflight" || e.digest() != before {
				t.Fatalf("%v", ie)
			}
		})
	}
}

// --enable-now on a same-version re-run re-proves running services and
// refuses, changing nothing, when they are not running.
func TestRerunWithEnableNow(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	again := with(writeRelease(t, v1), false, true)
	if err, out := e.run(again); err != nil || !strings.Contains(out, "serves; nothing changed") {
		t.Fatalf("%v %q", err, out)
	}
	e.h.svc.Stop(t.Context(), WorkerUnit)
	before, beforeState := e.digest(), e.state()
	ie := wantCode(t, func() error { err, _ := e.run(again); return err }(), ExitRefused)
	if !strings.Contains(ie.Msg, "systemctl enable --now") || e.digest() != before || e.state() != beforeState {
		t.Fatalf("%v %s", ie, e.state())
	}
	plain := newEnv(t)
	plain.mustRun(writeRelease(t, v1))
	wantCode(t, func() error { err, _ := plain.run(again); return err }(), ExitRefused)
}

// --upgrade --enable-now of an installation that was never enabled
// enables it; a failed one leaves no state directory behind.
func TestUpgradeOfANeverStartedInstallation(t *testing.T) {
	e := newEnv(t)
	e.mustRun(writeRelease(t, v1))
	up := with(writeRelease(t, v2), true, true)
	before, beforeState := e.digest(), e.state()
	e.h.svc.badReady["v1.1.0"] = true
	ie := wantCode(t, func() error { err, _ := e.run(up); return err }(), ExitRefused)
	if e.digest() != before || e.state() != beforeState {
		t.Fatalf("%v: not restored (state directory or database left?): %s", ie, e.state())
	}
	if _, err := os.Lstat(filepath.Join(e.root, StateRoot)); err == nil {
		t.Fatal("the new state directory stayed")
	}
	delete(e.h.svc.badReady, "v1.1.0")
	e.mustRun(up)
	if !e.h.svc.enabled[GateUnit] || !e.h.svc.enabled[WorkerUnit] || !e.h.svc.active[WorkerUnit] {
		t.Fatalf("not enabled and started: %s", e.state())
	}
}

// A start that fails while the unit stays active (Restart=on-failure) is
// stopped by the rollback.
func TestFailedStartIsStopped(t *testing.T) {
	for _, unit := range []string{GateUnit, WorkerUnit} {
		t.Run(unit, func(t *testing.T) {
			e := newEnv(t)
			empty, emptyState := e.digest(), e.state()
			e.h.svc.failActive = map[string]bool{unit: true}
			wantCode(t, func() error { err, _ := e.run(with(writeRelease(t, v1), false, true)); return err }(), ExitRefused)
			if e.digest() != empty || e.state() != emptyState {
				t.Fatalf("not restored: %s", e.state())
			}
		})
	}
}

// An existing account is reused only when it is a system account with its
// own memberless primary group; the two accounts never share ids.
func TestExistingAccountsAreChecked(t *testing.T) {
	cases := map[string]map[string]AccountInfo{
		"login uid":     {GateAccount: {UID: 1000, GID: 990, Group: GateAccount}},
		"shared group":  {WorkerAccount: {UID: 991, GID: 991, Group: "users"}},
		"group members": {GateAccount: {UID: 990, GID: 990, Group: GateAccount, Members: []string{"alice"}}},
		"same ids": {GateAccount: {UID: 990, GID: 990, Group: GateAccount},
			WorkerAccount: {UID: 990, GID: 990, Group: WorkerAccount}},
	}
	for name, users := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.h.acc.users = users
			before := e.digest()
			ie := wantCode(t, func() error { err, _ := e.run(writeRelease(t, v1)); return err }(), ExitRefused)
			if ie.Stage != "account" || e.digest() != before || len(e.h.acc.users) != len(users) {
				t.Fatalf("%v", ie)
			}
		})
	}
	e := newEnv(t)
	e.h.acc.users = map[string]AccountInfo{GateAccount: {UID: 980, GID: 980, Group: GateAccount}}
	e.mustRun(writeRelease(t, v1))
	r, _ := ReadReceipt(e.h.fs)
	if r.Gate != (Identity{980, 980}) || r.Worker != (Identity{991, 991}) {
		t.Fatalf("%+v", r)
	}
}

// The installed Gate's state, configuration and secrets are unreadable to
// the Worker account and the Worker's to the Gate's.
func TestTwoAccountsAreSeparated(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	r, _ := ReadReceipt(e.h.fs)
	if p := CheckSeparation(e.h.fs, r); len(p) > 0 {
		t.Fatal(p)
	}
	unit, _ := os.ReadFile(filepath.Join(e.root, UnitPath(GateUnit)))
	wunit, _ := os.ReadFile(filepath.Join(e.root, UnitPath(WorkerUnit)))
	if !strings.Contains(string(unit), "User="+GateAccount+"\n") || !strings.Contains(string(wunit), "User="+WorkerAccount+"\n") ||
		!strings.Contains(string(wunit), "SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self seccomp pidfd_getfd\n") {
		t.Fatal("units do not run as the two accounts with the Landlock and seccomp calls allowed")
	}
	// @system-service includes @aio: io_uring, whose operations no
	// seccomp filter sees, is taken back out of both units.
	for _, u := range [][]byte{unit, wunit} {
		if !strings.Contains(string(u), "SystemCallFilter=~@privileged @resources io_uring_setup io_uring_enter io_uring_register\n") {
			t.Fatal("a unit allows io_uring")
		}
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{GateStateDir, 0o755}, {GateConfig, 0o644}, {WorkerConfig, 0o644}, {WorkerState, 0o755}} {
		p := filepath.Join(e.root, c.path)
		fi, _ := os.Lstat(p)
		os.Chmod(p, c.mode)
		if len(CheckSeparation(e.h.fs, r)) == 0 {
			t.Fatalf("%s at %o passes", c.path, c.mode)
		}
		os.Chmod(p, fi.Mode().Perm())
	}
}

// An installation of the one-account layout is refused with a clear
// message, never half-migrated.
func TestOneAccountInstallationIsRefused(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	p := filepath.Join(e.root, ReceiptPath)
	os.Remove(p)
	os.WriteFile(p, []byte(`{"format":1,"version":"v1.0.0","commit":"`+commitOf('a')+`","uid":990,"gid":990}`+"\n"), 0o644)
	before, beforeState := e.digest(), e.state()
	ie := wantCode(t, func() error { err, _ := e.run(with(writeRelease(t, v2), true, true)); return err }(), ExitRefused)
	if !strings.Contains(ie.Msg, "one account") || !strings.Contains(ie.Msg, "docs/install.md") {
		t.Fatalf("%v", ie)
	}
	if e.digest() != before || e.state() != beforeState {
		t.Fatal("changed something")
	}
}

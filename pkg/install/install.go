package install

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"syscall"
)

// Self is the running forge binary's identity: an installer only installs
// its own release, so its store schema version is the release's.
type Self struct {
	Version string
	Commit  string
	Schema  int
}

// Run performs one `forge install` and writes its report lines to out. It
// returns nil or an *Error.
func Run(ctx context.Context, h Host, l Layout, self Self, req Request, out io.Writer) error {
	if self.Version != req.Version || self.Commit != req.Commit {
		return &Error{Code: ExitUsage, Stage: "identity", Msg: "this forge binary is not the requested release; run the forge binary from that release's CLI archive"}
	}
	rel, e := verifyRelease(req, runtime.GOARCH)
	if e != nil {
		return e
	}
	f := h.FS()
	if problems := CheckAncestors(f); len(problems) > 0 {
		return refused("preflight", "untrusted ancestor directory: "+problems[0])
	}
	// Rollback never reuses the run's context: an interrupt (Ctrl-C,
	// SIGTERM) cancels the forward path, never the undo steps, which have
	// their own bounds (each tool call, each proof's deadline).
	r := &run{ctx: ctx, undoCtx: context.WithoutCancel(ctx), h: h, f: f, l: l, self: self, req: req, rel: rel, out: out}
	defer func() {
		if r.unlock != nil {
			r.unlock()
		}
	}()
	if _, err := f.Lstat(ReceiptPath); err == nil {
		old, err := ReadReceipt(f)
		if errors.Is(err, ErrOneAccount) {
			return refused("receipt", err.Error())
		}
		if err != nil {
			return refused("receipt", "the installed receipt is invalid: "+err.Error())
		}
		if req.Upgrade {
			return r.upgrade(old)
		}
		if old.Version != req.Version || old.Commit != req.Commit {
			return refused("preflight", "another release ("+old.Version+") is installed; replacing it needs --upgrade --enable-now with a strictly newer version")
		}
		return r.validate(old)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return refused("receipt", "the installed receipt cannot be inspected")
	}
	if req.Upgrade {
		return refused("preflight", "nothing is installed to upgrade")
	}
	return r.fresh()
}

type run struct {
	// ctx is cancelled by an interrupt; undoCtx never is.
	ctx     context.Context
	undoCtx context.Context
	h       Host
	f       FS
	l       Layout
	self    Self
	req     Request
	rel     *release
	out     io.Writer
	tx      tx
	// unlock releases the installer lock once taken.
	unlock func()
}

func (r *run) say(format string, args ...any) {
	fmt.Fprintf(r.out, "forge install: "+format+"\n", args...)
}

// unitText renders the two units for the service identity.
func unitText(runAsRoot bool) map[string][]byte {
	return map[string][]byte{GateUnit: gateUnit(runAsRoot), WorkerUnit: workerUnit(runAsRoot)}
}

// UnitDigest is the SHA-256 of the unit this release installs for the
// service identity (forge doctor compares the receipt with it).
func UnitDigest(unit string, runAsRoot bool) string { return sha256hex(unitText(runAsRoot)[unit]) }

// digests returns the immutable files' digests for this release.
func (r *run) digests(runAsRoot bool) map[string]string {
	d := map[string]string{}
	for name, b := range r.rel.bins {
		d[BinDir+"/"+name] = sha256hex(b)
	}
	for u, b := range unitText(runAsRoot) {
		d[UnitPath(u)] = sha256hex(b)
	}
	return d
}

func (r *run) receipt(runAsRoot bool, gate, worker Identity, listen string) *Receipt {
	return &Receipt{
		Format: ReceiptFormat, Version: r.rel.version, Commit: r.rel.commit, SchemaVersion: r.self.Schema,
		Arch: r.rel.arch, RunAsRoot: runAsRoot, Gate: gate, Worker: worker, Listen: listen,
		Files: expectedFiles(gate, worker, r.digests(runAsRoot)),
	}
}

// validate is the same-version re-run: it proves the release matches the
// installed files and changes nothing.
func (r *run) validate(old *Receipt) error {
	if r.req.RunAsRoot != old.RunAsRoot {
		return refused("preflight", "the installed service identity differs from --run-as-root")
	}
	want := r.receipt(old.RunAsRoot, old.Gate, old.Worker, old.Listen)
	if string(want.Encode()) != string(old.Encode()) || old.SchemaVersion != r.self.Schema {
		return refused("preflight", "the installed receipt does not describe this release")
	}
	if problems := CheckImmutable(r.f, old); len(problems) > 0 {
		return refused("preflight", "the installed files differ from the receipt (no repair): "+problems[0])
	}
	// The mutable paths are compared too (type, owner, mode): a
	// configuration directory or secret that drifted is not "matching".
	if problems := append(CheckMutable(r.f, old), CheckStateRoot(r.f)...); len(problems) > 0 {
		return refused("preflight", "the installed configuration differs from the receipt (no repair): "+problems[0])
	}
	if e := checkIdentity(r.ctx, r.f, BinDir, r.rel.version, r.rel.commit); e != nil {
		return e
	}
	if r.req.EnableNow {
		// Validation-only still: the running services are re-proved, never
		// started or changed.
		s := r.h.Services()
		for _, u := range []string{GateUnit, WorkerUnit} {
			enabled, err1 := s.IsEnabled(r.ctx, u)
			active, err2 := s.IsActive(r.ctx, u)
			if err1 != nil || err2 != nil || !enabled || !active {
				return refused("preflight", "--enable-now on a same-version re-run only re-proves running services, and "+u+" is not enabled and active; start them with systemctl enable --now "+GateUnit+" "+WorkerUnit)
			}
		}
		client, err := r.client(old)
		if err != nil {
			return refused("preflight", err.Error())
		}
		if err := proveGate(r.ctx, r.h, client, old.Version, old.Commit, old.SchemaVersion); err != nil {
			return refused("readiness", err.Error())
		}
		if err := proveWorker(r.ctx, r.h, client); err != nil {
			return refused("readiness", err.Error())
		}
		r.say("%s (%s) is installed, matches the release and serves; nothing changed", old.Version, old.Commit)
		return nil
	}
	r.say("%s (%s) is installed and matches the release; nothing changed", old.Version, old.Commit)
	return nil
}

// tx is the undo stack of a run.
type tx struct {
	undo     []step
	cleanup  []step
	reloaded bool
}

type step struct {
	name string
	fn   func() error
}

func (t *tx) push(name string, fn func() error) { t.undo = append(t.undo, step{name, fn}) }

// temporary registers a staging path: removed on rollback and on success.
func (t *tx) temporary(p string, fn func() error) {
	t.push(p, fn)
	t.cleanup = append(t.cleanup, step{p, fn})
}

// rollback runs every undo step in reverse; it returns the names of the
// steps that failed.
func (t *tx) rollback() []string {
	var failed []string
	for i := len(t.undo) - 1; i >= 0; i-- {
		if err := t.undo[i].fn(); err != nil {
			failed = append(failed, t.undo[i].name)
		}
	}
	t.undo = nil
	return failed
}

// fail undoes everything and reports stage and msg with the right code.
func (r *run) fail(stage, msg string) error {
	failed := r.tx.rollback()
	if len(failed) == 0 {
		return &Error{Code: ExitRefused, Stage: stage, Msg: msg + "; everything was restored"}
	}
	return &Error{Code: ExitUnrestored, Stage: stage, Msg: msg + "; rollback failed, inspect: " + strings.Join(failed, ", ")}
}

func randomSuffix() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("install: the system random source failed")
	}
	return hex.EncodeToString(b[:])
}

// lock takes the installer lock and registers its release.
func (r *run) lock() error {
	release, created, err := r.f.Lock(LockPath)
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return errLocked
		}
		return errors.New("the installer lock cannot be taken")
	}
	r.unlock = release
	if created {
		r.tx.push(LockPath, func() error { return r.f.RemoveAll(LockPath) })
	}
	return nil
}

// stageTree writes the new prefix (binaries and receipt) into a private
// staging directory beside it, checks each binary's identity there, and
// returns the staged tree's path.
func (r *run) stageTree(rc *Receipt) (string, error) {
	dir, err := r.f.MkdirTemp("/opt", ".agent-forge.stage-")
	if err != nil {
		return "", errors.New("cannot create the staging directory")
	}
	r.tx.temporary(dir, func() error { return r.f.RemoveAll(dir) })
	tree := dir + "/tree"
	if err := r.mkdir(tree, 0o755, 0, 0); err != nil {
		return "", err
	}
	if err := r.mkdir(tree+"/bin", 0o755, 0, 0); err != nil {
		return "", err
	}
	for _, b := range binaries {
		if err := r.write(tree+"/bin/"+b.name, r.rel.bins[b.name], 0o755, 0, 0); err != nil {
			return "", err
		}
	}
	if e := checkIdentity(r.ctx, r.f, tree+"/bin", r.rel.version, r.rel.commit); e != nil {
		return "", errors.New(e.Msg)
	}
	if err := r.write(tree+"/receipt.json", rc.Encode(), 0o644, 0, 0); err != nil {
		return "", err
	}
	return tree, nil
}

// stageUnits writes the units as hidden files in the unit directory and
// returns their staged paths by unit name.
func (r *run) stageUnits(runAsRoot bool) (map[string]string, error) {
	staged := map[string]string{}
	for _, u := range []string{GateUnit, WorkerUnit} {
		p := UnitDir + "/." + u + ".stage-" + randomSuffix()
		r.tx.temporary(p, func() error { return r.f.RemoveAll(p) })
		if err := r.write(p, unitText(runAsRoot)[u], 0o644, 0, 0); err != nil {
			return nil, err
		}
		staged[u] = p
	}
	return staged, nil
}

func (r *run) mkdir(p string, perm fs.FileMode, uid, gid int) error {
	if err := r.f.Mkdir(p, perm); err != nil {
		return errors.New("cannot create " + p)
	}
	if err := r.f.Lchown(p, uid, gid); err != nil {
		return errors.New("cannot set the owner of " + p)
	}
	return nil
}

func (r *run) write(p string, data []byte, perm fs.FileMode, uid, gid int) error {
	if err := r.f.WriteFile(p, data, perm); err != nil {
		return errors.New("cannot write " + p)
	}
	if err := r.f.Lchown(p, uid, gid); err != nil {
		return errors.New("cannot set the owner of " + p)
	}
	return nil
}

// fresh is a clean install.
func (r *run) fresh() error {
	if err := r.lock(); err != nil {
		return r.fail("lock", err.Error())
	}
	for _, p := range []string{Prefix, ConfigDir, UnitPath(GateUnit), UnitPath(WorkerUnit), StateRoot} {
		if _, err := r.f.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return r.fail("preflight", p+" already exists without an install receipt (no repair or takeover)")
		}
	}
	var ids [2]Identity
	if !r.req.RunAsRoot {
		var err error
		if ids, err = r.accounts(true); err != nil {
			return r.fail("account", err.Error())
		}
	}
	rc := r.receipt(r.req.RunAsRoot, ids[0], ids[1], r.l.Listen)
	tree, err := r.stageTree(rc)
	if err != nil {
		return r.fail("stage", err.Error())
	}
	etc, err := r.stageConfig(rc)
	if err != nil {
		return r.fail("stage", err.Error())
	}
	units, err := r.stageUnits(r.req.RunAsRoot)
	if err != nil {
		return r.fail("stage", err.Error())
	}
	// Publish: configuration, then units, then the prefix with the
	// receipt, each with renameat2(RENAME_NOREPLACE).
	if err := r.publish(etc, ConfigDir, nil); err != nil {
		return r.fail("publish", err.Error())
	}
	for _, u := range []string{GateUnit, WorkerUnit} {
		if err := r.publish(units[u], UnitPath(u), r.reloadAfterUndo); err != nil {
			return r.fail("publish", err.Error())
		}
	}
	if err := r.publish(tree, Prefix, nil); err != nil {
		return r.fail("publish", err.Error())
	}
	if r.req.EnableNow {
		r.tx.push(StateRoot, func() error { return r.f.RemoveAll(StateRoot) })
		if err := r.activate(rc, map[string]bool{GateUnit: true, WorkerUnit: true}); err != nil {
			return err
		}
	}
	r.commit()
	if r.req.EnableNow {
		r.say("installed %s (%s) at %s; Gate ready and Worker connected", rc.Version, rc.Commit, Prefix)
	} else {
		r.say("installed %s (%s) at %s; services are not started", rc.Version, rc.Commit, Prefix)
	}
	return nil
}

// stageConfig writes gate.json, worker.json and the two environment files
// with fresh tokens into a staging directory beside ConfigDir.
func (r *run) stageConfig(rc *Receipt) (string, error) {
	dir, err := r.f.MkdirTemp("/etc", ".agent-forge.stage-")
	if err != nil {
		return "", errors.New("cannot create the configuration staging directory")
	}
	r.tx.temporary(dir, func() error { return r.f.RemoveAll(dir) })
	tree := dir + "/tree"
	if err := r.mkdir(tree, 0o755, 0, 0); err != nil {
		return "", err
	}
	owner, err := newToken()
	if err != nil {
		return "", err
	}
	worker, err := newToken()
	if err != nil {
		return "", err
	}
	files := []struct {
		name string
		data []byte
		perm fs.FileMode
		gid  int
	}{
		{"gate.json", gateConfig(r.l), 0o640, rc.Gate.GID},
		{"worker.json", workerConfig(r.l), 0o640, rc.Worker.GID},
		{"gate.env", envFile(OwnerTokenEnv, owner, WorkerTokenEnv, worker), 0o600, 0},
		{"worker.env", envFile(WorkerTokenEnv, worker), 0o600, 0},
	}
	for _, fl := range files {
		if err := r.write(tree+"/"+fl.name, fl.data, fl.perm, 0, fl.gid); err != nil {
			return "", err
		}
	}
	return tree, nil
}

// publish renames a staged path to its (absent) destination and registers
// its removal; after is run after the removal on rollback.
func (r *run) publish(staged, dest string, after func() error) error {
	if err := r.f.Rename(staged, dest); err != nil {
		return errors.New("cannot publish " + dest + ": " + err.Error())
	}
	r.tx.push(dest, func() error {
		if err := r.f.RemoveAll(dest); err != nil {
			return err
		}
		if after != nil {
			return after()
		}
		return nil
	})
	return nil
}

// reloadAfterUndo reloads systemd after a unit file is taken back, once
// systemd has seen it.
func (r *run) reloadAfterUndo() error {
	if !r.tx.reloaded {
		return nil
	}
	return r.h.Services().DaemonReload(r.undoCtx)
}

// activate reloads systemd, enables the units named in enable and starts
// the Gate, proves its readiness and identity, then the same for the
// Worker. Every undo step is pushed before the call it undoes (a failed
// start of a Restart=on-failure unit still needs its stop) and runs on the
// uncancellable context.
func (r *run) activate(rc *Receipt, enable map[string]bool) error {
	s := r.h.Services()
	// Even a failed daemon-reload may have loaded the new units: rollback
	// reloads the restored ones.
	r.tx.reloaded = true
	if err := s.DaemonReload(r.ctx); err != nil {
		return r.fail("activate", err.Error())
	}
	client, err := r.client(rc)
	if err != nil {
		return r.fail("activate", err.Error())
	}
	for _, u := range []string{GateUnit, WorkerUnit} {
		if enable[u] {
			r.tx.push("enablement of "+u, func() error { return s.Disable(r.undoCtx, u) })
			if err := s.Enable(r.ctx, u); err != nil {
				return r.fail("activate", err.Error())
			}
		}
		r.tx.push("the running "+u, func() error { return s.Stop(r.undoCtx, u) })
		if err := s.Start(r.ctx, u); err != nil {
			return r.fail("activate", r.interrupted(err.Error()))
		}
		if u == GateUnit {
			if err := proveGate(r.ctx, r.h, client, rc.Version, rc.Commit, rc.SchemaVersion); err != nil {
				return r.fail("readiness", r.interrupted(err.Error()))
			}
		} else if err := proveWorker(r.ctx, r.h, client); err != nil {
			return r.fail("readiness", r.interrupted(err.Error()))
		}
	}
	return nil
}

// interrupted names an interrupt as the cause when the run was cancelled.
func (r *run) interrupted(msg string) string {
	if r.ctx.Err() != nil {
		return "interrupted (" + msg + ")"
	}
	return msg
}

func (r *run) client(rc *Receipt) (*GateClient, error) {
	token, err := OwnerToken(r.f)
	if err != nil {
		return nil, err
	}
	return NewGateClient(rc.Listen, token, r.h.Services()), nil
}

// accounts looks up the Gate and Worker accounts, creating the missing
// ones when create is set (undone on rollback), and checks each is a
// system account with its own primary group that no one else is in, and
// that the two share nothing.
func (r *run) accounts(create bool) ([2]Identity, error) {
	var ids [2]Identity
	a := r.h.Accounts()
	for i, name := range ServiceAccounts {
		info, found, err := a.Lookup(name)
		if err != nil {
			return ids, err
		}
		if !found {
			if !create {
				return ids, errors.New("the " + name + " account is missing")
			}
			if err := a.CreateSystem(name); err != nil {
				return ids, errors.New("cannot create the " + name + " system account")
			}
			r.tx.push("the "+name+" account", func() error { return a.Remove(name) })
			if info, found, err = a.Lookup(name); err != nil || !found {
				return ids, errors.New("the created " + name + " account cannot be found")
			}
		}
		if err := checkAccount(name, info); err != nil {
			return ids, err
		}
		ids[i] = Identity{UID: info.UID, GID: info.GID}
	}
	if ids[0].UID == ids[1].UID || ids[0].GID == ids[1].GID {
		return ids, errors.New("the " + GateAccount + " and " + WorkerAccount + " accounts share a uid or gid")
	}
	return ids, nil
}

// SystemIDMax is the largest uid and gid of a system account (Debian's
// SYS_UID_MAX and SYS_GID_MAX).
const SystemIDMax = 999

// checkAccount requires a system account (uid and gid 1..SystemIDMax)
// whose primary group has the account's name and no other members.
func checkAccount(name string, a AccountInfo) error {
	switch {
	case a.UID < 1 || a.UID > SystemIDMax || a.GID < 1 || a.GID > SystemIDMax:
		return errors.New("the " + name + " account is not a system account (uid and gid 1-999)")
	case a.Group != name:
		return errors.New("the " + name + " account's primary group is not its own group")
	case len(a.Members) > 0:
		return errors.New("the " + name + " group has other members")
	}
	return nil
}

// commit ends a successful run: staging leftovers (and, after an upgrade,
// the previous files) are removed; nothing published is undone.
func (r *run) commit() {
	for _, c := range r.tx.cleanup {
		if err := c.fn(); err != nil {
			r.say("warning: could not remove %s", c.name)
		}
	}
	r.tx.undo, r.tx.cleanup = nil, nil
}

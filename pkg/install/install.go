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
	r := &run{ctx: ctx, h: h, f: f, l: l, self: self, req: req, rel: rel, out: out}
	defer func() {
		if r.unlock != nil {
			r.unlock()
		}
	}()
	if _, err := f.Lstat(ReceiptPath); err == nil {
		old, err := ReadReceipt(f)
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
	ctx  context.Context
	h    Host
	f    FS
	l    Layout
	self Self
	req  Request
	rel  *release
	out  io.Writer
	tx   tx
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

func (r *run) receipt(runAsRoot bool, uid, gid int, listen string) *Receipt {
	return &Receipt{
		Format: ReceiptFormat, Version: r.rel.version, Commit: r.rel.commit, SchemaVersion: r.self.Schema,
		Arch: r.rel.arch, RunAsRoot: runAsRoot, UID: uid, GID: gid, Listen: listen,
		Files: expectedFiles(uid, gid, r.digests(runAsRoot)),
	}
}

// validate is the same-version re-run: it proves the release matches the
// installed files and changes nothing.
func (r *run) validate(old *Receipt) error {
	if r.req.RunAsRoot != old.RunAsRoot {
		return refused("preflight", "the installed service identity differs from --run-as-root")
	}
	want := r.receipt(old.RunAsRoot, old.UID, old.GID, old.Listen)
	if string(want.Encode()) != string(old.Encode()) || old.SchemaVersion != r.self.Schema {
		return refused("preflight", "the installed receipt does not describe this release")
	}
	if problems := CheckImmutable(r.f, old); len(problems) > 0 {
		return refused("preflight", "the installed files differ from the receipt (no repair): "+problems[0])
	}
	if e := checkIdentity(r.ctx, r.f, BinDir, r.rel.version, r.rel.commit); e != nil {
		return e
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
	uid, gid := 0, 0
	if !r.req.RunAsRoot {
		a := r.h.Accounts()
		u, g, found, err := a.Lookup(Account)
		if err != nil {
			return r.fail("account", err.Error())
		}
		if !found {
			if err := a.CreateSystem(Account); err != nil {
				return r.fail("account", "cannot create the "+Account+" system account")
			}
			r.tx.push("the "+Account+" account", func() error { return a.Remove(Account) })
			if u, g, found, err = a.Lookup(Account); err != nil || !found {
				return r.fail("account", "the created "+Account+" account cannot be found")
			}
		}
		if u == 0 || g == 0 {
			return r.fail("account", "the "+Account+" account has uid or gid 0")
		}
		uid, gid = u, g
	}
	rc := r.receipt(r.req.RunAsRoot, uid, gid, r.l.Listen)
	tree, err := r.stageTree(rc)
	if err != nil {
		return r.fail("stage", err.Error())
	}
	etc, err := r.stageConfig(gid)
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
		if err := r.activate(rc, true); err != nil {
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
func (r *run) stageConfig(gid int) (string, error) {
	dir, err := r.f.MkdirTemp("/etc", ".agent-forge.stage-")
	if err != nil {
		return "", errors.New("cannot create the configuration staging directory")
	}
	r.tx.temporary(dir, func() error { return r.f.RemoveAll(dir) })
	tree := dir + "/tree"
	if err := r.mkdir(tree, 0o750, 0, gid); err != nil {
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
		{"gate.json", gateConfig(r.l), 0o640, gid},
		{"worker.json", workerConfig(r.l), 0o640, gid},
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
	return r.h.Services().DaemonReload(r.ctx)
}

// activate reloads systemd, enables (fresh only) and starts the Gate,
// proves its readiness and identity, then the same for the Worker.
func (r *run) activate(rc *Receipt, enable bool) error {
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
		if enable {
			if err := s.Enable(r.ctx, u); err != nil {
				return r.fail("activate", err.Error())
			}
			r.tx.push("enablement of "+u, func() error { return s.Disable(r.ctx, u) })
		}
		if err := s.Start(r.ctx, u); err != nil {
			return r.fail("activate", err.Error())
		}
		r.tx.push("the running "+u, func() error { return s.Stop(r.ctx, u) })
		if u == GateUnit {
			if err := proveGate(r.ctx, r.h, client, rc.Version, rc.Commit, rc.SchemaVersion); err != nil {
				return r.fail("readiness", err.Error())
			}
		} else if err := proveWorker(r.ctx, r.h, client); err != nil {
			return r.fail("readiness", err.Error())
		}
	}
	return nil
}

func (r *run) client(rc *Receipt) (*GateClient, error) {
	token, err := OwnerToken(r.f)
	if err != nil {
		return nil, err
	}
	return NewGateClient(rc.Listen, token), nil
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

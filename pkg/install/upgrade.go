package install

import (
	"errors"
	"io/fs"
	"strconv"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// NewSelf is the identity of a forge binary of version and commit: an
// installer installs only its own release, whose Gate schema version is
// this build's store schema.
func NewSelf(version, commit string) Self {
	return Self{Version: version, Commit: commit, Schema: store.SchemaVersion}
}

// upgrade replaces the binaries, units and receipt of the installation
// described by old with this release, keeping configuration, secrets,
// SQLite, repositories and Worker state, then re-proves both services.
// Any failure restores the previous files and services.
func (r *run) upgrade(old *Receipt) error {
	if !r.req.EnableNow {
		return refused("preflight", "--upgrade requires --enable-now (an upgrade is proved by readiness)")
	}
	oldV, _ := ParseSemver(old.Version)
	newV, _ := ParseSemver(r.req.Version)
	switch c := newV.Compare(oldV); {
	case c == 0:
		return refused("preflight", old.Version+" is already installed; --upgrade needs a strictly newer version")
	case c < 0:
		return refused("preflight", "downgrade from "+old.Version+" refused")
	}
	if old.SchemaVersion > r.self.Schema {
		return refused("preflight", "the installed Gate's schema version is newer than this release's")
	}
	if r.req.RunAsRoot != old.RunAsRoot {
		return refused("preflight", "an upgrade cannot change the service identity (--run-as-root)")
	}
	if old.Arch != r.rel.arch {
		return refused("preflight", "the installation is for another architecture")
	}
	if problems := CheckStateRoot(r.f); len(problems) > 0 {
		return refused("preflight", "untrusted state directory: "+problems[0])
	}
	// The new Gate migrates a database of an older schema when it opens
	// it, after writing a copy of it as it was (store.MigrationBackup),
	// which a rollback puts back in place.
	migrates := false
	if _, err := r.f.Lstat(Database); err == nil {
		v, err := store.ReadSchemaVersion(r.ctx, RealPath(r.f, Database))
		if err != nil || v != old.SchemaVersion {
			return refused("preflight", "the database schema version is not the installed one")
		}
		migrates = v < r.self.Schema
	} else if !errors.Is(err, fs.ErrNotExist) {
		return refused("preflight", "the database cannot be inspected")
	}
	if err := r.lock(); err != nil {
		return r.fail("lock", err.Error())
	}
	// What was read before the lock must still be what is installed.
	if now, err := ReadReceipt(r.f); err != nil || string(now.Encode()) != string(old.Encode()) {
		return r.fail("lock", "another installer changed the installation while this one waited; run it again")
	}
	if problems := CheckImmutable(r.f, old); len(problems) > 0 {
		return r.fail("preflight", "the installed files differ from the receipt (no repair): "+problems[0])
	}
	if problems := CheckMutable(r.f, old); len(problems) > 0 {
		return r.fail("preflight", "unsafe configuration path: "+problems[0])
	}
	if !old.RunAsRoot {
		ids, err := r.accounts(false)
		if err != nil {
			return r.fail("account", err.Error())
		}
		if ids[0] != old.Gate || ids[1] != old.Worker {
			return r.fail("account", "the "+GateAccount+" and "+WorkerAccount+" accounts do not match the receipt")
		}
	}
	rc := r.receipt(old.RunAsRoot, old.Gate, old.Worker, old.Listen)
	tree, err := r.stageTree(rc)
	if err != nil {
		return r.fail("stage", err.Error())
	}
	units, err := r.stageUnits(old.RunAsRoot)
	if err != nil {
		return r.fail("stage", err.Error())
	}
	client, err := r.client(old)
	if err != nil {
		return r.fail("preflight", err.Error())
	}

	// Stop the Worker, then the Gate; their undo restarts whichever was
	// running (after the previous files are back) and re-proves it.
	// A never-started installation has no state directory yet: the new
	// Gate's first start creates it and its database, so rollback removes
	// them again (after the new services are stopped).
	s := r.h.Services()
	if _, err := r.f.Lstat(StateRoot); errors.Is(err, fs.ErrNotExist) {
		r.tx.push(StateRoot, func() error { return r.f.RemoveAll(StateRoot) })
	} else if err != nil {
		return r.fail("preflight", StateRoot+" cannot be inspected")
	}
	enable := map[string]bool{}
	for _, u := range []string{WorkerUnit, GateUnit} {
		enabled, err := s.IsEnabled(r.ctx, u)
		if err != nil {
			return r.fail("activate", err.Error())
		}
		// --enable-now enables what was never enabled (undone on rollback).
		enable[u] = !enabled
		active, err := s.IsActive(r.ctx, u)
		if err != nil {
			return r.fail("activate", err.Error())
		}
		if active {
			if u == WorkerUnit {
				r.tx.push("the previous "+u, func() error {
					if err := s.Start(r.undoCtx, u); err != nil {
						return err
					}
					return proveWorker(r.undoCtx, r.h, client)
				})
			} else {
				r.tx.push("the previous "+u, func() error {
					if err := s.Start(r.undoCtx, u); err != nil {
						return err
					}
					return proveGate(r.undoCtx, r.h, client, old.Version, old.Commit, old.SchemaVersion)
				})
			}
		}
		if err := s.Stop(r.ctx, u); err != nil {
			return r.fail("activate", err.Error())
		}
	}

	// Once the previous unit files are back, systemd reloads them (when it
	// has seen the new ones) before any previous service restarts.
	r.tx.push("systemd's view of the restored units", r.reloadAfterUndo)
	if migrates {
		// Once the new Gate is stopped, before the previous one starts.
		r.tx.push("the database of schema "+strconv.Itoa(old.SchemaVersion), func() error {
			return r.unmigrate(old.SchemaVersion)
		})
	}

	// Swap each path: the previous one moves aside, the staged one takes
	// its place; both renames refuse to replace anything.
	swaps := []struct{ staged, dest string }{{tree, Prefix}}
	for _, u := range []string{GateUnit, WorkerUnit} {
		swaps = append(swaps, struct{ staged, dest string }{units[u], UnitPath(u)})
	}
	for _, sw := range swaps {
		if err := r.swap(sw.staged, sw.dest); err != nil {
			return r.fail("publish", err.Error())
		}
	}
	if err := r.activate(rc, enable); err != nil {
		return err
	}
	r.commit()
	r.say("upgraded %s to %s (%s); Gate ready and Worker connected", old.Version, rc.Version, rc.Commit)
	if migrates {
		r.say("the Gate migrated its database from schema %d to %d; the copy from before is %s (remove it once the upgrade is kept)",
			old.SchemaVersion, r.self.Schema, store.MigrationBackup(Database, old.SchemaVersion))
	}
	return nil
}

// unmigrate undoes the new Gate's migration of the database from schema
// version (rollback): unless the database is still at that version (the
// new Gate never migrated it), the copy the new Gate's store wrote before
// migrating (store.MigrationBackup: the Gate's account, mode 0600) takes
// its place, after the migrated database's -wal and -shm are removed (a
// WAL left beside the copy would be replayed into it). The copy holds the
// same content as the database before the upgrade, not the same file.
func (r *run) unmigrate(version int) error {
	if v, err := store.ReadSchemaVersion(r.undoCtx, RealPath(r.f, Database)); err == nil && v == version {
		return nil
	}
	backup := store.MigrationBackup(Database, version)
	fi, err := r.f.Lstat(backup)
	if err != nil || !fi.Mode().IsRegular() {
		return errors.New("the database was migrated and " + backup + " is missing")
	}
	if v, err := store.ReadSchemaVersion(r.undoCtx, RealPath(r.f, backup)); err != nil || v != version {
		return errors.New(backup + " is not a database of schema " + strconv.Itoa(version))
	}
	for _, p := range []string{Database + "-wal", Database + "-shm", Database} {
		if err := r.f.RemoveAll(p); err != nil {
			return err
		}
	}
	return r.f.Rename(backup, Database)
}

// swap moves dest aside to a hidden sibling and the staged path into dest.
// Rollback moves them back; success removes the previous one.
func (r *run) swap(staged, dest string) error {
	aside := dirOf(dest) + "/." + baseOf(dest) + ".previous-" + randomSuffix()
	if err := r.f.Rename(dest, aside); err != nil {
		return errors.New("cannot move " + dest + " aside: " + err.Error())
	}
	r.tx.push(dest, func() error { return r.f.Rename(aside, dest) })
	if err := r.f.Rename(staged, dest); err != nil {
		return errors.New("cannot publish " + dest + ": " + err.Error())
	}
	r.tx.push("the new "+dest, func() error { return r.f.Rename(dest, staged) })
	r.tx.cleanup = append(r.tx.cleanup, step{aside, func() error { return r.f.RemoveAll(aside) }})
	return nil
}

func dirOf(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

func baseOf(p string) string { return p[len(dirOf(p))+1:] }

// RealPath is the real path of a host path, for readers that open files
// themselves (the SQLite schema reader).
func RealPath(f FS, p string) string { return f.Real(p) }

package install

import (
	"compress/gzip"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// installedAtOlderSchema is an installation of req whose release's Gate
// schema is store.SchemaVersion-1, serving a database of that schema
// written by the store of that release (pkg/store/testdata/schema).
func installedAtOlderSchema(t *testing.T, req Request) (*env, int) {
	t.Helper()
	old := store.SchemaVersion - 1
	e := newEnv(t)
	req.EnableNow = true
	var out strings.Builder
	if err := Run(context.Background(), e.h, e.layout, Self{Version: req.Version, Commit: req.Commit, Schema: old}, req, &out); err != nil {
		t.Fatalf("install at schema %d: %v (%s)", old, err, out.String())
	}
	if err := e.h.svc.Stop(t.Context(), GateUnit); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(e.root, Database)
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		os.Remove(p)
	}
	in, err := os.Open(filepath.Join("..", "store", "testdata", "schema", fmt.Sprintf("schema-%d.db.gz", old)))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(db, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, io.LimitReader(zr, 16<<20)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, _ := ReadReceipt(e.h.fs)
	if err := os.Chown(db, r.Gate.UID, r.Gate.GID); err != nil {
		t.Fatal(err)
	}
	if err := e.h.svc.Start(t.Context(), GateUnit); err != nil {
		t.Fatal(err)
	}
	return e, old
}

// schemaAndJobs reads a database's schema version and its job ids.
func schemaAndJobs(t *testing.T, path string) string {
	t.Helper()
	v, err := store.ReadSchemaVersion(context.Background(), path)
	if err != nil {
		t.Fatalf("schema of %s: %v", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids string
	if err := db.QueryRow(`SELECT group_concat(id, ',') FROM (SELECT id FROM jobs ORDER BY id)`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("schema %d jobs %s", v, ids)
}

const fixtureJobIDs = "done,queued,retrying,running"

// TestUpgradeMigratesAnOlderSchema: an upgrade to a release of a newer
// Gate schema goes through (the old installer refused it: "schema
// migration is not supported"); the new Gate migrates the database in
// place, every job kept, and a copy of the database as it was stays
// beside it (the Gate's account, 0600).
func TestUpgradeMigratesAnOlderSchema(t *testing.T) {
	e, old := installedAtOlderSchema(t, writeRelease(t, v1))
	db := filepath.Join(e.root, Database)
	if got := schemaAndJobs(t, db); got != fmt.Sprintf("schema %d jobs %s", old, fixtureJobIDs) {
		t.Fatalf("before the upgrade: %s", got)
	}
	err, out := e.run(with(writeRelease(t, v2), true, true))
	if err != nil {
		t.Fatalf("upgrade: %v (%s)", err, out)
	}
	if got := schemaAndJobs(t, db); got != fmt.Sprintf("schema %d jobs %s", store.SchemaVersion, fixtureJobIDs) {
		t.Fatalf("after the upgrade: %s", got)
	}
	copyPath := store.MigrationBackup(db, old)
	if got := schemaAndJobs(t, copyPath); got != fmt.Sprintf("schema %d jobs %s", old, fixtureJobIDs) {
		t.Fatalf("the copy: %s", got)
	}
	r, _ := ReadReceipt(e.h.fs)
	wantOwned(t, copyPath, r.Gate.UID)
	if r.SchemaVersion != store.SchemaVersion || !strings.Contains(out, store.MigrationBackup(Database, old)) {
		t.Fatalf("receipt schema %d, output %q", r.SchemaVersion, out)
	}
}

// TestUpgradeRollbackUnmigratesTheDatabase: an upgrade whose new Gate
// migrated the database and then failed its readiness puts the copy from
// before the migration back (schema and jobs as before, the copy gone,
// no -wal of the migrated database left), and the previous release
// serves again.
func TestUpgradeRollbackUnmigratesTheDatabase(t *testing.T) {
	e, old := installedAtOlderSchema(t, writeRelease(t, v1))
	db := filepath.Join(e.root, Database)
	beforeState := e.state()
	migrated := false
	e.h.svc.onStart = func(u string) {
		if u == GateUnit && !migrated {
			v, err := store.ReadSchemaVersion(context.Background(), db)
			migrated = err == nil && v == store.SchemaVersion
		}
	}
	e.h.svc.badReady["v1.1.0"] = true
	err, out := e.run(with(writeRelease(t, v2), true, true))
	ie := wantCode(t, err, ExitRefused)
	if ie.Stage != "readiness" {
		t.Fatalf("stage %s (%s) %s", ie.Stage, ie.Msg, out)
	}
	if !migrated {
		t.Fatal("the new Gate never migrated the database")
	}
	if got := schemaAndJobs(t, db); got != fmt.Sprintf("schema %d jobs %s", old, fixtureJobIDs) {
		t.Fatalf("after the rollback: %s", got)
	}
	if _, err := os.Lstat(store.MigrationBackup(db, old)); !os.IsNotExist(err) {
		t.Fatalf("the copy is still there: %v", err)
	}
	if got := e.state(); got != beforeState {
		t.Fatalf("state %s, want %s", got, beforeState)
	}
	r, _ := ReadReceipt(e.h.fs)
	wantOwned(t, db, r.Gate.UID)
}

// wantOwned fails unless path is a regular file of uid, mode 0600.
func wantOwned(t *testing.T, path string, uid int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || int(st.Uid) != uid {
		t.Fatalf("%s: mode %v owner %d, want a 0600 file of %d", path, fi.Mode(), st.Uid, uid)
	}
}

// TestMigratingUpgradeFailureAtEveryStepRestores: every mutating step of
// an upgrade whose new Gate migrates the database fails once in turn;
// each failure leaves the previous release serving its database of the
// older schema with every job, and no copy behind.
func TestMigratingUpgradeFailureAtEveryStepRestores(t *testing.T) {
	e, old := installedAtOlderSchema(t, writeRelease(t, v1))
	db := filepath.Join(e.root, Database)
	up := with(writeRelease(t, v2), true, true)
	beforeState := e.state()
	want := fmt.Sprintf("schema %d jobs %s", old, fixtureJobIDs)
	migrated := false // in this run, before its fault
	e.h.svc.onStart = func(u string) {
		if v, err := store.ReadSchemaVersion(context.Background(), db); err == nil && v == store.SchemaVersion {
			migrated = true
		}
	}
	unmigrated := 0
	for k := 1; ; k++ {
		migrated = false
		e.arm(k)
		err, out := e.run(up)
		if e.h.f.hit == "" || err == nil {
			if err != nil {
				t.Fatalf("unfaulted upgrade failed: %v", err)
			}
			break
		}
		ie := wantCode(t, err, ExitRefused)
		if got := schemaAndJobs(t, db); got != want {
			t.Fatalf("fault %d (%s, stage %s): %s, want %s (%s)", k, e.h.f.hit, ie.Stage, got, want, out)
		}
		if _, err := os.Lstat(store.MigrationBackup(db, old)); !os.IsNotExist(err) {
			t.Fatalf("fault %d (%s): the copy is left behind: %v", k, e.h.f.hit, err)
		}
		if migrated {
			unmigrated++
		}
		if got := e.state(); got != beforeState {
			t.Fatalf("fault %d (%s): state %s, want %s", k, e.h.f.hit, got, beforeState)
		}
	}
	if unmigrated < 1 {
		t.Fatalf("only %d faults after the new Gate migrated the database", unmigrated)
	}
	if got := schemaAndJobs(t, db); got != fmt.Sprintf("schema %d jobs %s", store.SchemaVersion, fixtureJobIDs) {
		t.Fatalf("after the upgrade: %s", got)
	}
}

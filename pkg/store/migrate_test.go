package store

import (
	"compress/gzip"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The files in testdata/schema were written by the store of the commit
// before each schema change (schema-1: before 7967862,
// schema-2: before fe9e60a, schema-3: before a85fb44, schema-4: before
// 31cc8c3), each through its own
// Open and DDL: one lane, a job succeeded ("done", result "hello"), one in
// retry_wait after a retryable failure ("retrying"), one leased
// ("running", lane worker-1, generation gen(1)), one pending ("queued").

// oldDatabase puts testdata/schema/schema-<v>.db.gz in a new state
// directory as forge.db (mode 0600) and returns its path.
func oldDatabase(t *testing.T, v int) string {
	t.Helper()
	in, err := os.Open(filepath.Join("testdata", "schema", fmt.Sprintf("schema-%d.db.gz", v)))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(privateDir(t), "forge.db")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, io.LimitReader(zr, 16<<20)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// fixtureStatuses reads each job's status from a database file.
func fixtureStatuses(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, status FROM jobs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		got[id] = st
	}
	return got
}

var fixtureJobs = map[string]string{"done": JobSucceeded, "retrying": JobRetryWait, "running": JobLeased, "queued": JobPending}

// TestOpenMigratesOlderSchemaFiles: a database written by the store of
// schema 1, 2 or 3 opens with this build: it is migrated in place to
// SchemaVersion with every job as it was, and works (leases, results,
// expiry); before migrating, Open wrote a copy of it as it was
// (MigrationBackup: mode 0600, schema V, the same jobs), which the old
// store did not; opening it again migrates and copies nothing more.
func TestOpenMigratesOlderSchemaFiles(t *testing.T) {
	for v := 1; v < SchemaVersion; v++ {
		t.Run(fmt.Sprintf("schema-%d", v), func(t *testing.T) {
			path := oldDatabase(t, v)
			if got, err := ReadSchemaVersion(bg, path); err != nil || got != v {
				t.Fatalf("fixture schema %d %v, want %d", got, err, v)
			}
			s := mustOpen(t, path)
			if got, err := ReadSchemaVersion(bg, path); err != nil || got != SchemaVersion {
				t.Fatalf("migrated schema %d %v", got, err)
			}
			backup := MigrationBackup(path, v)
			fi, err := os.Lstat(backup)
			if err != nil {
				t.Fatalf("no copy before the migration: %v", err)
			}
			if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Fatalf("copy mode %v", fi.Mode())
			}
			if info, err := CheckCopy(bg, backup); err != nil || info.SchemaVersion != v {
				t.Fatalf("copy %+v %v, want schema %d", info, err, v)
			}
			if got := fixtureStatuses(t, backup); fmt.Sprint(got) != fmt.Sprint(fixtureJobs) {
				t.Fatalf("jobs in the copy %v, want %v", got, fixtureJobs)
			}
			for id, want := range fixtureJobs {
				j, err := s.Job(bg, id)
				if err != nil || j.Status != want {
					t.Fatalf("job %s after migration: %+v %v, want %s", id, j, err, want)
				}
			}
			if j, _ := s.Job(bg, "done"); j.Result == nil || *j.Result != "hello" {
				t.Fatalf("result after migration: %+v", j)
			}
			now := t0.Add(time.Hour)
			res, err := s.Sweep(bg, now)
			if err != nil || len(res.Expired) != 1 || res.Expired[0].JobID != "running" {
				t.Fatalf("sweep after migration: %+v %v", res, err)
			}
			now = now.Add(time.Minute) // the expired attempt's retry is due
			mustConnect(t, s, "worker-1", gen(2), now)
			for range 3 {
				l := mustLease(t, s, "worker-1", gen(2), now)
				if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(2)), textOK("after"), now); err != nil {
					t.Fatalf("complete after migration: %v", err)
				}
			}
			for _, id := range []string{"retrying", "running", "queued"} {
				if j, _ := s.Job(bg, id); j.Status != JobSucceeded {
					t.Fatalf("job %s: %+v", id, j)
				}
			}
			s.Close()
			os.Remove(backup)
			s = mustOpen(t, path)
			s.Close()
			if _, err := os.Lstat(backup); !os.IsNotExist(err) {
				t.Fatalf("a current database was copied again: %v", err)
			}
			if m, _ := filepath.Glob(path + ".schema-*"); len(m) != 0 {
				t.Fatalf("left behind: %v", m)
			}
		})
	}
}

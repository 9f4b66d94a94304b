package doctor

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// liveDatabase is a Forge database held open as a Gate holds it: its
// schema version recorded only in the WAL (nothing checkpointed yet), -wal
// and -shm present. It returns the path and the open connection.
func liveDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gate")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "forge.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		fmt.Sprintf("PRAGMA application_id = %d", store.ApplicationID),
		"CREATE TABLE header_only (x)", // the application id reaches the file in rollback mode
		"PRAGMA journal_mode = WAL",
		"CREATE TABLE schema_version (id INTEGER PRIMARY KEY, version INTEGER NOT NULL)",
		fmt.Sprintf("INSERT INTO schema_version VALUES (1, %d)", store.SchemaVersion),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path, db
}

// TestCopyUnchangedSurvivesACheckpointMidCopy: the Gate checkpoints its
// WAL into the database, restarts the WAL and writes on, between doctor's
// copy of the database and its copy of the -wal. That pair misses the
// checkpointed frames (here the whole schema_version table), which the old
// doctor read as "the database schema version cannot be read"; the copy
// is now made again and reads the version.
func TestCopyUnchangedSurvivesACheckpointMidCopy(t *testing.T) {
	src, live := liveDatabase(t)
	dst := filepath.Join(t.TempDir(), "forge.db")
	meddled := 0
	cp := func(from, to string, max int64) (int64, error) {
		n, err := copyFile(from, to, max)
		if err == nil && from == src && meddled == 0 {
			meddled++
			for _, q := range []string{"PRAGMA wal_checkpoint(TRUNCATE)", "CREATE TABLE after_restart (x)"} {
				if _, err := live.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
		return n, err
	}
	if err := copyUnchanged(src, dst, cp); err != nil {
		t.Fatal(err)
	}
	if meddled != 1 {
		t.Fatal("the checkpoint never ran between the copies")
	}
	if v, err := store.ReadSchemaVersion(context.Background(), dst); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version of the copy: %d %v", v, err)
	}
}

// TestCopyUnchangedGivesUpOnAlwaysChangingDatabase: a database that
// changes during every copy is reported as such, after copyAttempts
// copies, never read torn.
func TestCopyUnchangedGivesUpOnAlwaysChangingDatabase(t *testing.T) {
	src, live := liveDatabase(t)
	dst := filepath.Join(t.TempDir(), "forge.db")
	copies := 0
	cp := func(from, to string, max int64) (int64, error) {
		n, err := copyFile(from, to, max)
		if from == src {
			copies++
			if _, err := live.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				t.Fatal(err)
			}
			if _, err := live.Exec(fmt.Sprintf("CREATE TABLE churn_%d (x)", copies)); err != nil {
				t.Fatal(err)
			}
		}
		return n, err
	}
	err := copyUnchanged(src, dst, cp)
	if err == nil || !strings.Contains(err.Error(), "kept changing") || copies != copyAttempts {
		t.Fatalf("err %v after %d copies", err, copies)
	}
}

// TestCopyUnchangedLeavesTheLiveFilesAlone: the copy of a live database
// reads its version and changes nothing of the live files (the -shm
// wal-index included: the copy gets an empty one, SQLite rebuilds it from
// the WAL).
func TestCopyUnchangedLeavesTheLiveFilesAlone(t *testing.T) {
	src, _ := liveDatabase(t)
	read := func() string {
		var b strings.Builder
		for _, s := range []string{"", "-wal", "-shm"} {
			c, err := os.ReadFile(src + s)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s:%x;", s, c)
		}
		return b.String()
	}
	before := read()
	dst := filepath.Join(t.TempDir(), "forge.db")
	if err := copyUnchanged(src, dst, copyFile); err != nil {
		t.Fatal(err)
	}
	if v, err := store.ReadSchemaVersion(context.Background(), dst); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version of the copy: %d %v", v, err)
	}
	if read() != before {
		t.Fatal("the live files changed")
	}
}

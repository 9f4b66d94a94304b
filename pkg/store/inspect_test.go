package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSchemaVersion(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	// While the Gate's store is open.
	if v, err := ReadSchemaVersion(bg, path); err != nil || v != SchemaVersion {
		t.Fatalf("running: %d %v", v, err)
	}
	s.Close()
	dir := filepath.Dir(path)
	before := snapshotNames(t, dir)
	if v, err := ReadSchemaVersion(bg, "file://"+path+"?mode=rwc"); err != nil || v != SchemaVersion {
		t.Fatalf("closed: %d %v", v, err)
	}
	if after := snapshotNames(t, dir); after != before {
		t.Fatalf("reading created files: %s -> %s", before, after)
	}
	// Another program's SQLite file is not read as version 0: it is not an
	// Agent Forge database. An empty file (a database Open has just
	// created) reads as 0.
	plain := filepath.Join(dir, "plain.db")
	raw, err := sql.Open("sqlite", plain)
	if err != nil {
		t.Fatal(err)
	}
	raw.Exec("CREATE TABLE schema_version (id INTEGER PRIMARY KEY, version INTEGER)")
	raw.Exec("INSERT INTO schema_version VALUES (1, 1)")
	raw.Close()
	if v, err := ReadSchemaVersion(bg, plain); !errors.Is(err, ErrForeignDatabase) || v != 0 {
		t.Fatalf("plain: %d %v", v, err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadSchemaVersion(bg, empty); err != nil || v != 0 {
		t.Fatalf("empty: %d %v", v, err)
	}
	for name, dsn := range map[string]string{
		"missing":   filepath.Join(dir, "missing.db"),
		"directory": dir + "/sub/..",
		"memory":    ":memory:",
		"bad dsn":   "file:" + path + "?mode=ro",
	} {
		_, err := ReadSchemaVersion(bg, dsn)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error names the path: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a missing database was created")
	}
}

func snapshotNames(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// A lone -wal or -shm (an unclean stop, a stray file) is never completed
// by reading: the reader creates nothing and fails closed.
func TestReadSchemaVersionCreatesNoWALCompanion(t *testing.T) {
	for _, lone := range []string{"-wal", "-shm"} {
		s, path := openFile(t)
		mustSubmit(t, s, textJob("j1", 1), t0)
		s.Close()
		if err := os.WriteFile(path+lone, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(path)
		before := snapshotNames(t, dir)
		_, err := ReadSchemaVersion(bg, path)
		if after := snapshotNames(t, dir); after != before {
			t.Fatalf("%s alone: reading created files: %s -> %s", lone, before, after)
		}
		if err == nil || strings.Contains(err.Error(), dir) {
			t.Fatalf("%s alone: error %v", lone, err)
		}
	}
}

//go:build unix

package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// foreignDB builds a SQLite database at path with another program's
// statements (through a plain connection, no Gate code), then gives it the
// mode the preflight wants, so only its identity can be refused.
func foreignDB(t *testing.T, path string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// expectForeign opens dsn, requires ErrForeignDatabase with a path-free
// message, and proves nothing under root changed (the database is byte
// for byte the same and no -wal, -shm or -journal appeared).
func expectForeign(t *testing.T, root, dsn string) {
	t.Helper()
	before := snapshot(t, root)
	s, err := Open(context.Background(), dsn)
	if err == nil {
		s.Close()
		t.Fatal("foreign database accepted")
	}
	if !errors.Is(err, ErrForeignDatabase) || !strings.Contains(err.Error(), "not an Agent Forge database") {
		t.Fatalf("error %v is not ErrForeignDatabase", err)
	}
	if strings.Contains(err.Error(), "/") {
		t.Fatalf("error names a path: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, root))
}

func TestOpenRefusesForeignDatabase(t *testing.T) {
	cases := map[string][]string{
		// Rollback-journal databases (SQLite's default) with unrelated or
		// colliding tables.
		"unrelated table": {"CREATE TABLE customers (name TEXT)", "INSERT INTO customers VALUES ('alice')"},
		"colliding jobs":  {"CREATE TABLE jobs (x)", "INSERT INTO jobs VALUES (1)"},
		// Even a foreign table named like the store's version table.
		"schema_version": {"CREATE TABLE schema_version (id INTEGER PRIMARY KEY, version INTEGER)", "INSERT INTO schema_version VALUES (1, 1)"},
		// A WAL-mode database of another application.
		"wal mode":            {"PRAGMA journal_mode = WAL", "CREATE TABLE customers (name TEXT)"},
		"other application":   {"PRAGMA application_id = 1234", "CREATE TABLE t (x)"},
		"empty but formatted": {"PRAGMA user_version = 7"},
	}
	for name, stmts := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			db := filepath.Join(state, "forge.db")
			foreignDB(t, db, stmts...)
			expectForeign(t, root, db)
			expectForeign(t, root, "file://"+db+"?mode=rwc")
		})
	}
	for name, content := range map[string]string{
		"garbage":   strings.Repeat("\x17not sqlite at all\x00", 300),
		"truncated": "SQLite format 3\x00\x10\x00",
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			db := filepath.Join(state, "forge.db")
			mustWrite(t, db, content, 0o600)
			expectForeign(t, root, db)
		})
	}
	t.Run("truncated copy of a Gate database", func(t *testing.T) {
		s, path := openFile(t)
		mustSubmit(t, s, textJob("j1", 1), t0)
		s.Close()
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 4096 {
			t.Fatalf("database %d bytes, %v", len(b), err)
		}
		root := t.TempDir()
		mustMkdir(t, filepath.Join(root, "state"), 0o700)
		db := filepath.Join(root, "state", "forge.db")
		mustWrite(t, db, string(b[:60]), 0o600)
		expectForeign(t, root, db)
	})
}

// TestNewDatabaseCarriesApplicationID: Open stamps ApplicationID into the
// main file's header of a new database (so the header check holds even
// before the first checkpoint), and reopening keeps working.
func TestNewDatabaseCarriesApplicationID(t *testing.T) {
	s, path := openFile(t)
	hdr := make([]byte, sqliteHeaderBytes)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(hdr, 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(hdr[68:72]); got != ApplicationID {
		t.Fatalf("application id %#x, want %#x", got, ApplicationID)
	}
	if hdr[18] != 2 || hdr[19] != 2 {
		t.Fatalf("header format bytes %d/%d, want WAL (2/2)", hdr[18], hdr[19])
	}
	mustSubmit(t, s, textJob("j1", 1), t0)
	s.Close()
	s = mustOpen(t, path)
	if mustJob(t, s, "j1").Status != JobPending {
		t.Fatal("job lost across reopen")
	}
	s.Close()
}

// TestNewerSchemaRefusedUnchanged: a Gate database from a newer build
// still fails closed with ErrSchemaTooNew, and the refusal writes nothing.
func TestNewerSchemaRefusedUnchanged(t *testing.T) {
	s, path := openFile(t)
	s.Close()
	raw, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("UPDATE schema_version SET version = ?", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	root := filepath.Dir(path)
	before := snapshot(t, root)
	if _, err := Open(context.Background(), path); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, root))
}

func TestCheckHeader(t *testing.T) {
	ours := make([]byte, sqliteHeaderBytes)
	copy(ours, "SQLite format 3\x00")
	binary.BigEndian.PutUint32(ours[68:], ApplicationID)
	if err := checkHeader(ours, 4096); err != nil {
		t.Fatalf("own header refused: %v", err)
	}
	if err := checkHeader(nil, 0); err != nil {
		t.Fatalf("empty file refused: %v", err)
	}
	other := bytes.Clone(ours)
	binary.BigEndian.PutUint32(other[68:], 0)
	for name, c := range map[string]struct {
		hdr  []byte
		size int64
	}{
		"no application id": {other, 4096},
		"short":             {ours[:50], 50},
		"bad magic":         {append([]byte("SQLite format 4\x00"), ours[16:]...), 4096},
	} {
		if err := checkHeader(c.hdr, c.size); !errors.Is(err, ErrForeignDatabase) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func FuzzCheckHeader(f *testing.F) {
	for _, b := range seeds(f, "header") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, hdr []byte) {
		if len(hdr) > sqliteHeaderBytes {
			hdr = hdr[:sqliteHeaderBytes]
		}
		err := checkHeader(hdr, int64(len(hdr)))
		ok := len(hdr) == 0 || len(hdr) == sqliteHeaderBytes &&
			string(hdr[:16]) == "SQLite format 3\x00" && binary.BigEndian.Uint32(hdr[68:72]) == ApplicationID
		if (err == nil) != ok {
			t.Fatalf("header %x: err %v, want ok=%v", hdr, err, ok)
		}
		if err != nil && !errors.Is(err, ErrForeignDatabase) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// TestMissingDatabaseWithCompanionsRefused: with the database missing, any
// existing -journal, -wal or -shm (insecure, a symlink, a directory, or
// even a private 0600 file SQLite would silently delete or reuse) is
// refused before the database is created: nothing is left behind.
func TestMissingDatabaseWithCompanionsRefused(t *testing.T) {
	type fixture func(t *testing.T, p string)
	file := func(mode os.FileMode) fixture {
		return func(t *testing.T, p string) { mustWrite(t, p, "", mode) }
	}
	cases := []struct {
		name, suffix string
		make         fixture
	}{
		{"wal 0644", "-wal", file(0o644)},
		{"journal 0666", "-journal", file(0o666)},
		{"shm symlink", "-shm", func(t *testing.T, p string) { os.Symlink("/nonexistent-target", p) }},
		{"wal directory", "-wal", func(t *testing.T, p string) { mustMkdir(t, p, 0o700) }},
		{"private wal", "-wal", file(0o600)},
		{"private shm", "-shm", file(0o600)},
		{"private journal", "-journal", file(0o600)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "state")
			mustMkdir(t, state, 0o700)
			db := filepath.Join(state, "forge.db")
			c.make(t, db+c.suffix)
			expectInsecure(t, root, db, c.suffix+" file")
			if _, err := os.Lstat(db); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("database was created")
			}
		})
	}
}

// countdownCtx is a context that becomes cancelled after a set number of
// Done/Err calls: it cancels Open at every step in turn without timing.
type countdownCtx struct {
	context.Context
	mu     sync.Mutex
	left   int
	done   chan struct{}
	closed bool
}

func newCountdown(n int) *countdownCtx {
	return &countdownCtx{Context: context.Background(), left: n, done: make(chan struct{})}
}

func (c *countdownCtx) tick() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		if c.left == 0 {
			close(c.done)
			c.closed = true
		} else {
			c.left--
		}
	}
	return c.closed
}

func (c *countdownCtx) Done() <-chan struct{} {
	c.tick()
	return c.done
}

func (c *countdownCtx) Err() error {
	if c.tick() {
		return context.Canceled
	}
	return nil
}

// TestOpenCancelledReportsCancellation: whichever step of opening a new
// file database a cancellation interrupts, Open either completes or fails
// with an error that is context.Canceled (never a misleading "synchronous
// is not FULL" or "not in WAL mode"), and a later Open of the same path
// works.
func TestOpenCancelledReportsCancellation(t *testing.T) {
	succeeded := false
	for n := 0; n < 400 && !succeeded; n++ {
		dir := privateDir(t)
		db := filepath.Join(dir, "forge.db")
		s, err := Open(newCountdown(n), db)
		if err == nil {
			succeeded = true
			s.Close()
		} else {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled after %d checks: %v", n, err)
			}
			if !strings.Contains(err.Error(), "interrupted") && !strings.Contains(err.Error(), "canceled") {
				t.Fatalf("message does not say so: %v", err)
			}
		}
		s = mustOpen(t, db)
		mustSubmit(t, s, textJob("j1", 1), t0)
		s.Close()
	}
	if !succeeded {
		t.Fatal("Open never completed")
	}
}

func TestCreateFailureNamesCause(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		syscall.EROFS:  "read-only file system",
		syscall.EACCES: "not writable",
		syscall.ENOSPC: "no space",
	} {
		got := createFailure(&fs.PathError{Op: "open", Path: "/secret/forge.db", Err: errno})
		if !strings.Contains(got, want) || strings.Contains(got, "secret") {
			t.Fatalf("%v: %q", errno, got)
		}
	}
	if got := createFailure(&fs.PathError{Op: "open", Path: "/x", Err: syscall.EEXIST}); got != "" {
		t.Fatalf("EEXIST: %q", got)
	}
	// A private directory without owner write permission is named as such
	// (checked for a non-root UID: root bypasses the permission bits).
	ro := privateDir(t)
	if err := os.Chmod(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o700)
	rofi, err := os.Lstat(ro)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkWritable(ro, rofi, uint32(os.Geteuid())+1000); err == nil || !strings.Contains(err.Error(), "not writable") || strings.Contains(err.Error(), ro) {
		t.Fatalf("unwritable directory: %v", err)
	}
	if err := checkWritable(privateDir(t), rofi, 0); err != nil {
		t.Fatalf("root on a writable file system: %v", err)
	}
	if os.Geteuid() != 0 {
		// A real unwritable private directory (root would bypass the bits).
		dir := privateDir(t)
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		_, err := Open(context.Background(), filepath.Join(dir, "forge.db"))
		if err == nil || !strings.Contains(err.Error(), "not writable") || strings.Contains(err.Error(), dir) {
			t.Fatalf("unwritable directory: %v", err)
		}
	}
}

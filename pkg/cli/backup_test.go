package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// gateDB creates a migrated Gate database in a private directory and
// returns its path (the store is closed again).
func gateDB(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "forge.db")
	s, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ConnectLane(context.Background(), "worker-1", "worker-1", 0, strings.Repeat("a", 32), time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return path
}

func TestBackupUsageIsExitOne(t *testing.T) {
	for name, args := range map[string][]string{
		"no path":      {"backup"},
		"two paths":    {"backup", "/x/secretdir", "/y"},
		"unknown flag": {"backup", "-secretdir", "/x"},
		"bad timeout":  {"backup", "-timeout", "0s", "/x/secretdir"},
		"bad db":       {"backup", "-db", "file:secretdir?mode=ro", "/x"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runForge(t, nil, "", args...)
			wantCode(t, r, 1)
			if r.stdout != "" || !strings.Contains(r.stderr, "error:") || strings.Contains(r.stderr, "secretdir") {
				t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}
}

func TestBackupWritesACheckedCopy(t *testing.T) {
	db := gateDB(t)
	dst := filepath.Join(t.TempDir(), "secretdir.db")
	r := runForge(t, nil, "", "backup", "-db", db, dst)
	wantCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "forge backup: wrote ") || !strings.Contains(r.stdout, "integrity ok, schema version "+strconv.Itoa(store.SchemaVersion)) {
		t.Fatalf("stdout %q", r.stdout)
	}
	if _, err := store.CheckCopy(context.Background(), dst); err != nil {
		t.Fatal(err)
	}
	// A refusal is exit 2, names no path and leaves the destination.
	bad := filepath.Join(t.TempDir(), "secretdir")
	os.WriteFile(bad, []byte("not a database, long enough to have a header of a hundred bytes........................................"), 0o600)
	before, _ := os.ReadFile(dst)
	r = runForge(t, nil, "", "backup", "-db", bad, dst)
	wantCode(t, r, 2)
	if after, _ := os.ReadFile(dst); string(after) != string(before) || strings.Contains(r.stderr, "secretdir") || !strings.Contains(r.stderr, "unchanged") {
		t.Fatalf("stderr %q, destination changed %v", r.stderr, string(after) != string(before))
	}
}

func TestRestoreUsageAndRefusals(t *testing.T) {
	for name, args := range map[string][]string{
		"no path":   {"restore"},
		"two paths": {"restore", "/x/secretdir", "/y"},
		"bad db":    {"restore", "-db", "", "/x/secretdir"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runForge(t, nil, "", args...)
			wantCode(t, r, 1)
			if r.stdout != "" || strings.Contains(r.stderr, "secretdir") {
				t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}
	db := gateDB(t)
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	wantCode(t, runForge(t, nil, "", "backup", "-db", db, copyPath), 0)
	// A running Gate (a Store holds the state directory) is refused.
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	r := runForge(t, nil, "", "restore", "-db", db, copyPath)
	s.Close()
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "a Gate is running") {
		t.Fatalf("stderr %q", r.stderr)
	}
	// The database is still there: refused, nothing changed.
	r = runForge(t, nil, "", "restore", "-db", db, copyPath)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "already has a database") {
		t.Fatalf("stderr %q", r.stderr)
	}
	fresh := filepath.Join(t.TempDir(), "state")
	os.Mkdir(fresh, 0o700)
	r = runForge(t, nil, "", "restore", "-db", filepath.Join(fresh, "forge.db"), copyPath)
	wantCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "forge restore: restored ") || !strings.Contains(r.stdout, "fencing epoch 1") {
		t.Fatalf("stdout %q", r.stdout)
	}
	s, err = store.Open(context.Background(), filepath.Join(fresh, "forge.db"))
	if err != nil {
		t.Fatalf("the restored database does not open: %v", err)
	}
	s.Close()
}

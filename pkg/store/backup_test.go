package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// churn submits, leases and completes jobs on s until stop is closed; acked
// holds the number of jobs whose Submit returned (ids "c-0" … in order).
func churn(t *testing.T, s *Store, stop <-chan struct{}, acked *atomic.Int64) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	mustConnect(t, s, "worker-1", gen(1), t0)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Submit(bg, textJob(fmt.Sprintf("c-%d", i), 2), t0); err != nil {
				t.Errorf("submit: %v", err)
				return
			}
			acked.Add(1)
			if i%2 == 0 {
				l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, t0)
				if err != nil || l == nil {
					t.Errorf("lease: %v", err)
					return
				}
				if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK("done"), t0); err != nil {
					t.Errorf("complete: %v", err)
					return
				}
			}
		}
	}()
	return &wg
}

// openCopy opens a backup read-only and immutable.
func openCopy(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(path)+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestBackupWhileWriting copies the database three times while a writer
// keeps submitting, leasing and completing jobs. Each copy passes the
// checks, holds every job acknowledged before the copy began, and is one
// snapshot: every job's event count matches its events, every attempt's
// job exists, and the job ids present are exactly c-0 … c-(n-1).
func TestBackupWhileWriting(t *testing.T) {
	s, path := openFile(t)
	var acked atomic.Int64
	stop := make(chan struct{})
	wg := churn(t, s, stop, &acked)
	defer func() { close(stop); wg.Wait() }()
	dir := t.TempDir()
	for round := 0; round < 3; round++ {
		for acked.Load() < int64(200*(round+1)) {
			time.Sleep(5 * time.Millisecond)
		}
		before := acked.Load()
		dst := filepath.Join(dir, "backup.db")
		var calls atomic.Int64
		info, err := Backup(bg, path, dst, func(written, total int64) { calls.Add(1) })
		if err != nil {
			t.Fatalf("round %d: backup: %v", round, err)
		}
		if info.SchemaVersion != SchemaVersion || info.Bytes <= 0 || calls.Load() < 1 {
			t.Fatalf("round %d: info %+v, progress calls %d", round, info, calls.Load())
		}
		fi, err := os.Lstat(dst)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: backup file %v mode %v", round, err, fi.Mode())
		}
		db := openCopy(t, dst)
		var n, mism, orphans int64
		if err := db.QueryRow("SELECT count(*) FROM jobs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < before {
			t.Fatalf("round %d: copy has %d jobs, %d were acknowledged before it began", round, n, before)
		}
		var maxID int64
		if err := db.QueryRow("SELECT coalesce(max(CAST(substr(id, 3) AS INTEGER)), -1) FROM jobs").Scan(&maxID); err != nil {
			t.Fatal(err)
		}
		if maxID != n-1 {
			t.Fatalf("round %d: %d jobs but the newest is c-%d: not one snapshot", round, n, maxID)
		}
		if err := db.QueryRow(`SELECT count(*) FROM jobs j WHERE j.event_count <> (SELECT count(*) FROM events e WHERE e.job_seq = j.seq)`).Scan(&mism); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.seq = a.job_seq)`).Scan(&orphans); err != nil {
			t.Fatal(err)
		}
		if mism != 0 || orphans != 0 {
			t.Fatalf("round %d: %d jobs with a wrong event count, %d orphan attempts", round, mism, orphans)
		}
		db.Close()
		if left, _ := filepath.Glob(filepath.Join(dir, ".backup.db.tmp-*")); len(left) != 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
	}
}

func TestBackupOfStoppedGateCreatesNothing(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	s.Close()
	before, _ := os.ReadDir(filepath.Dir(path))
	dst := filepath.Join(t.TempDir(), "b.db")
	if _, err := Backup(bg, path, dst, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(filepath.Dir(path))
	if len(after) != len(before) {
		t.Fatalf("the state directory changed: %v -> %v", before, after)
	}
	var id string
	if err := openCopy(t, dst).QueryRow("SELECT id FROM jobs").Scan(&id); err != nil || id != "j1" {
		t.Fatalf("copy: %q %v", id, err)
	}
}

func TestBackupRefusals(t *testing.T) {
	_, path := openFile(t)
	good := t.TempDir()
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	foreignDB := filepath.Join(privateDir(t), "other.db")
	if err := os.WriteFile(foreignDB, []byte(strings.Repeat("x", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	lone := filepath.Join(privateDir(t), "lone.db")
	if err := os.WriteFile(lone, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(lone+"-wal", nil, 0o600)
	for _, c := range []struct {
		name, dsn, dst string
		want           error
	}{
		{"memory", ":memory:", filepath.Join(good, "a.db"), ErrBackupRefused},
		{"missing database", filepath.Join(good, "none.db"), filepath.Join(good, "b.db"), ErrBackupRefused},
		{"destination is the database", path, path, ErrBackupRefused},
		{"destination is a companion", path, path + "-wal", ErrBackupRefused},
		{"destination is a directory", path, good, ErrBackupRefused},
		{"destination directory missing", path, filepath.Join(good, "no", "c.db"), ErrBackupRefused},
		{"destination directory world-writable", path, filepath.Join(open, "d.db"), ErrBackupRefused},
		{"foreign database", foreignDB, filepath.Join(good, "e.db"), ErrForeignDatabase},
		{"lone -wal", lone, filepath.Join(good, "f.db"), ErrBackupRefused},
	} {
		_, err := Backup(bg, c.dsn, c.dst, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), good) || strings.Contains(err.Error(), filepath.Dir(path)) {
			t.Errorf("%s: error names a path: %v", c.name, err)
		}
	}
	if ents, _ := os.ReadDir(good); len(ents) != 0 {
		t.Fatalf("refusals left files: %v", ents)
	}
}

func TestBackupCancelledLeavesDestination(t *testing.T) {
	s, path := openFile(t)
	for i := 0; i < 50; i++ {
		mustSubmit(t, s, textJob(fmt.Sprintf("j%d", i), 1), t0)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "b.db")
	if err := os.WriteFile(dst, []byte("previous"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := Backup(ctx, path, dst, nil); err == nil {
		t.Fatal("a cancelled backup succeeded")
	}
	if b, _ := os.ReadFile(dst); string(b) != "previous" {
		t.Fatalf("destination changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files left: %v", ents)
	}
}

func TestCheckCopyRefusesNewerSchema(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	dst := filepath.Join(t.TempDir(), "b.db")
	if _, err := Backup(bg, path, dst, nil); err != nil {
		t.Fatal(err)
	}
	bumpSchema(t, dst)
	if _, err := CheckCopy(bg, dst); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("CheckCopy = %v, want ErrSchemaTooNew", err)
	}
}

// bumpSchema records a schema version newer than this build's in the
// standalone database at path.
func bumpSchema(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(path)+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE schema_version SET version = ?", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
}

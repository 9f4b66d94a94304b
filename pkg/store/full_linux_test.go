package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallFS mounts a tmpfs of size bytes (mode 0700, so the store's
// preflight accepts it as the database's directory) and returns its path.
// It needs root: under CI a missing root fails instead of skipping.
func smallFS(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the full-disk tests mount a tmpfs: they need root and CI is set")
		}
		t.Skip("the full-disk tests mount a tmpfs: they need root")
	}
	d := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("forge-full-test", d, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(d, syscall.MNT_DETACH) })
	return d
}

// fill writes a ballast file until the file system refuses more; removing
// it gives the space back.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return p
		}
	}
}

func bigTextJob(id string) NewJob {
	j := textJob(id, 3)
	j.Task = []byte(`{"input":"` + strings.Repeat("x", 16<<10) + `"}`)
	return j
}

// A write that meets a full file system fails with ErrFull, is rolled back
// (nothing of it is readable, nothing answered nil), reads keep working, and
// once space is back Probe and new writes succeed; the database stays
// intact and every acknowledged job is there.
func TestFullDiskRollsBackAndRecovers(t *testing.T) {
	dir := smallFS(t, 4<<20)
	// A reserve given back later: the space an operator frees.
	reserve := filepath.Join(dir, "reserve")
	if err := os.WriteFile(reserve, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, filepath.Join(dir, "forge.db"))
	ctx := context.Background()
	now := t0
	var acked []string
	var full error
	for i := 0; i < 10000 && full == nil; i++ {
		id := fmt.Sprintf("%032x", i+1)
		if _, err := s.Submit(ctx, bigTextJob(id), now); err != nil {
			full = err
			if _, err := s.Job(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the refused job is readable: %v", err)
			}
			break
		}
		acked = append(acked, id)
	}
	if !errors.Is(full, ErrFull) && !errors.Is(full, ErrStorageIO) {
		t.Fatalf("filling the disk: got %v, want ErrFull or ErrStorageIO", full)
	}
	t.Logf("first refusal: %v", full)
	if len(acked) == 0 {
		t.Fatal("no job was stored before the disk filled")
	}
	// Make sure no slack is left, then check that reads work and
	// writes are still refused.
	ballast := fill(t, dir)
	if _, err := s.Job(ctx, acked[0]); err != nil {
		t.Fatalf("read on a full disk: %v", err)
	}
	if _, err := s.Submit(ctx, bigTextJob(fmt.Sprintf("%032x", 88888)), now); !errors.Is(err, ErrFull) && !errors.Is(err, ErrStorageIO) {
		t.Fatalf("submit on a full disk: %v", err)
	}
	for _, p := range []string{ballast, reserve} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("probe after freeing space: %v", err)
	}
	mustSubmit(t, s, bigTextJob(fmt.Sprintf("%032x", 99999)), now)
	checkIntact(t, s, acked)
}

// A Gate restarting on a file system its WAL and database filled opens
// the store: an up-to-date database is opened without writing.
func TestOpenOnFullDisk(t *testing.T) {
	dir := smallFS(t, 4<<20)
	path := filepath.Join(dir, "forge.db")
	s := mustOpen(t, path)
	ctx := context.Background()
	var acked []string
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("%032x", i+1)
		if _, err := s.Submit(ctx, bigTextJob(id), t0); err != nil {
			break
		}
		acked = append(acked, id)
	}
	fill(t, dir)
	s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer s2.Close()
	if _, err := s2.MarkAllLanesDisconnected(ctx, t0); err != nil && !errors.Is(err, ErrFull) && !errors.Is(err, ErrStorageIO) {
		t.Fatalf("write on a full disk: %v, want a storage error", err)
	}
	checkIntact(t, s2, acked)
}

// checkIntact runs integrity_check and reads every acknowledged job.
func checkIntact(t *testing.T, s *Store, acked []string) {
	t.Helper()
	ctx := context.Background()
	var res string
	if err := s.rdb.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
	for _, id := range acked {
		if _, err := s.Job(ctx, id); err != nil {
			t.Fatalf("acknowledged job %s: %v", id, err)
		}
	}
}

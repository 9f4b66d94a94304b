package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func maxSeq(t *testing.T, s *Store, id string) int {
	t.Helper()
	evs, err := s.Events(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs[len(evs)-1].Seq
}

// TestRestoreOpensNewEpoch backs up a database holding a leased attempt,
// lets the lost Gate go on (a retry and a new lease after the backup),
// restores the backup in a fresh directory and replays the pre-loss
// results: every one is refused, and the job's next events are numbered
// above anything the lost database issued.
func TestRestoreOpensNewEpoch(t *testing.T) {
	s, path := openFile(t)
	mustConnect(t, s, "worker-1", gen(1), t0)
	mustSubmit(t, s, textJob("j1", 3), t0)
	a1 := mustLease(t, s, "worker-1", gen(1), t0)
	backup := filepath.Join(t.TempDir(), "b.db")
	if _, err := Backup(bg, path, backup, nil); err != nil {
		t.Fatal(err)
	}
	// After the backup, before the loss.
	if _, err := s.Complete(bg, fenceOf(a1, "worker-1", gen(1)), retryable(), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	a2 := mustLease(t, s, "worker-1", gen(1), t0.Add(time.Hour))
	lostMax := maxSeq(t, s, "j1")
	s.Close()

	target := filepath.Join(privateDir(t), "forge.db")
	now := t0.Add(2 * time.Hour)
	info, err := Restore(bg, backup, target, now)
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 1 || info.SchemaVersion != SchemaVersion || info.EventFloor < now.UnixMicro() {
		t.Fatalf("info %+v", info)
	}
	fi, err := os.Lstat(target)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("restored database: %v %v", err, fi.Mode())
	}
	if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 1 {
		t.Fatalf("state directory holds %v", ents)
	}
	r := mustOpen(t, target)
	// Before any Worker reconnects, the copy's lane generation is no
	// longer live, even before the attempt's deadline.
	if _, err := r.Complete(bg, fenceOf(a1, "worker-1", gen(1)), textOK("pre-loss"), t0.Add(2*time.Second)); !errors.Is(err, ErrStale) {
		t.Fatalf("a pre-loss result on the copy's generation: Complete = %v, want ErrStale", err)
	}
	// The Worker reconnects with a new generation; the lost Gate's results
	// come back on it and on the old generation.
	mustConnect(t, r, "worker-1", gen(2), now)
	for _, c := range []struct {
		name string
		f    Fence
		want error
	}{
		{"backed-up attempt, old generation", fenceOf(a1, "worker-1", gen(1)), ErrStale},
		{"backed-up attempt, new generation", fenceOf(a1, "worker-1", gen(2)), ErrStale},
		{"attempt leased after the backup", fenceOf(a2, "worker-1", gen(1)), ErrNotFound},
	} {
		if _, err := r.Complete(bg, c.f, textOK("pre-loss"), now); !errors.Is(err, c.want) {
			t.Errorf("%s: Complete = %v, want %v", c.name, err, c.want)
		}
		if _, err := r.Heartbeat(bg, c.f, now); !errors.Is(err, c.want) {
			t.Errorf("%s: Heartbeat = %v, want %v", c.name, err, c.want)
		}
	}
	// Attempt 1 expires at its deadline and the job goes on, its events
	// numbered above the lost database's.
	if _, err := r.Sweep(bg, now); err != nil {
		t.Fatal(err)
	}
	l := mustLease(t, r, "worker-1", gen(2), now.Add(time.Hour))
	if l.JobID != "j1" || l.AttemptID == a1.AttemptID || l.AttemptID == a2.AttemptID {
		t.Fatalf("lease %+v", l)
	}
	if _, err := r.Complete(bg, fenceOf(l, "worker-1", gen(2)), textOK("after"), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	evs, err := r.Events(bg, "j1")
	if err != nil {
		t.Fatal(err)
	}
	fresh := 0
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Fatalf("events out of order: %+v", evs)
		}
		if e.Seq > 2 { // the copy held submitted (1) and leased (2)
			if e.Seq <= lostMax || int64(e.Seq) <= info.EventFloor {
				t.Fatalf("event %+v reuses a number the lost database may have issued (up to %d)", e, lostMax)
			}
			fresh++
		}
	}
	if fresh < 3 {
		t.Fatalf("expected the expiry, the lease and the success after the restore: %+v", evs)
	}
	job, err := r.Job(bg, "j1")
	if err != nil || job.Status != "succeeded" {
		t.Fatalf("job %+v %v", job, err)
	}
	r.Close()

	// A second restore of the same copy opens a later floor and epoch 1
	// again from that copy; the epoch counts restores of its lineage.
	target2 := filepath.Join(privateDir(t), "forge.db")
	info2, err := Restore(bg, backup, target2, now.Add(time.Minute))
	if err != nil || info2.EventFloor <= info.EventFloor {
		t.Fatalf("second restore %+v %v", info2, err)
	}
}

func TestRestoreRefusals(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	good := filepath.Join(t.TempDir(), "b.db")
	if _, err := Backup(bg, path, good, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	b, _ := os.ReadFile(good)
	for i := 4096; i < len(b) && i < 4096*3; i++ {
		b[i] ^= 0x5a
	}
	os.WriteFile(corrupt, b, 0o600)
	foreignFile := filepath.Join(t.TempDir(), "foreign.db")
	os.WriteFile(foreignFile, []byte(strings.Repeat("y", 8192)), 0o600)

	running := filepath.Join(privateDir(t), "forge.db")
	mustOpen(t, running) // a Gate on that directory
	occupied := filepath.Join(privateDir(t), "forge.db")
	os.WriteFile(occupied+"-wal", nil, 0o600)
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o755)
	fresh := func() string { return filepath.Join(privateDir(t), "forge.db") }

	for _, c := range []struct {
		name, src, dsn string
		want           error
	}{
		{"gate running", good, running, ErrLocked},
		{"companion present", good, occupied, ErrBackupRefused},
		{"directory open to others", good, filepath.Join(open, "forge.db"), ErrBackupRefused},
		{"directory missing", good, filepath.Join(t.TempDir(), "no", "forge.db"), ErrBackupRefused},
		{"copy missing", filepath.Join(t.TempDir(), "none.db"), fresh(), ErrBackupRefused},
		{"copy corrupt", corrupt, fresh(), ErrBackupRefused},
		{"copy foreign", foreignFile, fresh(), ErrForeignDatabase},
		{"memory", good, ":memory:", ErrBackupRefused},
	} {
		dir := filepath.Dir(c.dsn)
		before, _ := os.ReadDir(dir)
		_, err := Restore(bg, c.src, c.dsn, t0)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), c.src) {
			t.Errorf("%s: error names a path: %v", c.name, err)
		}
		if after, _ := os.ReadDir(dir); c.dsn != ":memory:" && len(after) != len(before) {
			t.Errorf("%s: the directory changed: %v -> %v", c.name, before, after)
		}
	}
}

func TestRestoreRefusesNewerSchema(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	s.Close()
	dst := filepath.Join(t.TempDir(), "b.db")
	if _, err := Backup(bg, path, dst, nil); err != nil {
		t.Fatal(err)
	}
	bumpSchema(t, dst)
	target := filepath.Join(privateDir(t), "forge.db")
	if _, err := Restore(bg, dst, target, t0); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Restore = %v, want ErrSchemaTooNew", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}

// TestRestoreGivesTheDirectoryOwner: the restored file belongs to the
// state directory's owner (the Gate's account), whoever runs the restore.
func TestRestoreGivesTheDirectoryOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	s.Close()
	dst := filepath.Join(t.TempDir(), "b.db")
	if _, err := Backup(bg, path, dst, nil); err != nil {
		t.Fatal(err)
	}
	dir := privateDir(t)
	if err := os.Chown(dir, 4321, 4322); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "forge.db")
	if _, err := Restore(bg, dst, target, t0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(target)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("owner %d:%d mode %v", st.Uid, st.Gid, fi.Mode())
	}
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// litestreamBinary finds Litestream (.ci/run installs it); without it the
// test skips, unless CI is set.
func litestreamBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("litestream")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("litestream is not installed (.ci/run installs it with go install)")
		}
		t.Skip("litestream is not installed")
	}
	return bin
}

// replicaFixture is a Litestream process replicating one database to a
// file replica, with its control socket.
type replicaFixture struct {
	t       *testing.T
	bin     string
	db      string
	replica string
	socket  string
	config  string
	cmd     *exec.Cmd
}

func newReplicaFixture(t *testing.T) *replicaFixture {
	t.Helper()
	root := t.TempDir()
	f := &replicaFixture{
		t:       t,
		bin:     litestreamBinary(t),
		db:      filepath.Join(privateDirIn(t, root, "state"), "forge.db"),
		replica: filepath.Join(root, "replica"),
		socket:  filepath.Join(privateDirIn(t, root, "run"), "litestream.sock"),
		config:  filepath.Join(root, "litestream.yml"),
	}
	cfg := fmt.Sprintf("socket:\n  enabled: true\n  path: %s\n  permissions: 0600\ndbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n",
		f.socket, f.db, f.replica)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.kill)
	return f
}

func privateDirIn(t *testing.T, root, name string) string {
	t.Helper()
	d := filepath.Join(root, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// start runs `litestream replicate` and waits for its control socket.
func (f *replicaFixture) start() {
	f.t.Helper()
	os.Remove(f.socket)
	f.cmd = exec.Command(f.bin, "replicate", "-config", f.config)
	f.cmd.Stdout, f.cmd.Stderr = nil, nil
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := f.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(f.socket); err == nil {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatal("litestream's control socket did not appear")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *replicaFixture) kill() {
	if f.cmd == nil || f.cmd.Process == nil {
		return
	}
	syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
	f.cmd.Wait()
	f.cmd = nil
}

// restore restores the replica to a new file and returns its job ids.
func (f *replicaFixture) restoredJobs() map[string]bool {
	f.t.Helper()
	out := filepath.Join(f.t.TempDir(), "restored.db")
	cmd := exec.Command(f.bin, "restore", "-o", out, "file://"+f.replica)
	if b, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("litestream restore: %v: %s", err, b)
	}
	db, err := sql.Open("sqlite", fileURI(out)+"?mode=ro")
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id FROM jobs`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			f.t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

func (f *replicaFixture) open(mode string) *Store {
	f.t.Helper()
	s, err := OpenReplicated(context.Background(), f.db, Replication{Mode: mode, Socket: f.socket})
	if err != nil {
		f.t.Fatalf("open: %v", err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// TestSyncReplicationAcknowledgesReplicatedWrites: with "sync", every
// Submit that returned is in the replica the moment it returns (Litestream
// is killed right after the last acknowledgement, so nothing it did later
// counts); with Litestream gone, a Submit is refused with ErrUnreplicated
// (the old store acknowledged it), and it is acknowledged again once
// Litestream is back.
func TestSyncReplicationAcknowledgesReplicatedWrites(t *testing.T) {
	f := newReplicaFixture(t)
	s := f.open(ReplicationSync)
	f.start()

	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("s-%d-%d", c, i)
				if _, err := s.Submit(bg, textJob(id, 2), t0); err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	f.kill()
	got := f.restoredJobs()
	for _, id := range acked {
		if !got[id] {
			t.Fatalf("acknowledged job %s is not in the replica (%d of %d there)", id, len(got), len(acked))
		}
	}
	if len(acked) != 100 {
		t.Fatalf("%d submits acknowledged, want 100", len(acked))
	}

	// Litestream restarting within the retry budget: the write waits for
	// it and is acknowledged once it confirms.
	done := make(chan error, 1)
	go func() {
		_, err := s.Submit(bg, textJob("waited", 2), t0)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("submit answered without litestream: %v", err)
	default:
	}
	f.start()
	if err := <-done; err != nil {
		t.Fatalf("submit with litestream back within the budget: %v", err)
	}
	f.kill()
	if got := f.restoredJobs(); !got["waited"] {
		t.Fatal("the job acknowledged after litestream came back is not in the replica")
	}

	// Past the budget (none here), the write is refused: it is in the
	// local database but was not acknowledged.
	s.w.held.mu.Lock()
	s.w.held.retryFor = 0
	s.w.held.mu.Unlock()
	if _, err := s.Submit(bg, textJob("lost", 2), t0); !errors.Is(err, ErrUnreplicated) {
		t.Fatalf("submit without litestream: %v, want ErrUnreplicated", err)
	}
}

// TestReplicationLeavesCheckpointsToLitestream: with a replica the writer
// never checkpoints on its own (wal_autocheckpoint 0); without one it
// keeps its backstop.
func TestReplicationLeavesCheckpointsToLitestream(t *testing.T) {
	for _, c := range []struct {
		mode string
		want int
	}{{ReplicationOff, walBackstopPages}, {ReplicationAsync, 0}, {ReplicationSync, 0}} {
		t.Run(c.mode, func(t *testing.T) {
			path := filepath.Join(privateDir(t), "forge.db")
			s, err := OpenReplicated(bg, path, Replication{Mode: c.mode, Socket: "/nonexistent/litestream.sock"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got int
			// A read: nothing to sync (no Litestream runs here).
			err = s.w.submit(bg, &op{read: true, ctx: bg, done: make(chan error, 1), fn: func(tx *wtx) error {
				return tx.queryRow("PRAGMA wal_autocheckpoint").Scan(&got)
			}})
			if err != nil || got != c.want {
				t.Fatalf("wal_autocheckpoint = %d (%v), want %d", got, err, c.want)
			}
		})
	}
}

// TestReplicationRefusals: an unknown mode, a relative or missing socket,
// and a replicated memory database are refused before anything opens.
func TestReplicationRefusals(t *testing.T) {
	dir := privateDir(t)
	for name, c := range map[string]struct {
		dsn string
		r   Replication
	}{
		"unknown mode":    {filepath.Join(dir, "a.db"), Replication{Mode: "eventually", Socket: "/run/l.sock"}},
		"no socket":       {filepath.Join(dir, "b.db"), Replication{Mode: ReplicationSync}},
		"relative socket": {filepath.Join(dir, "c.db"), Replication{Mode: ReplicationAsync, Socket: "l.sock"}},
		"memory":          {":memory:", Replication{Mode: ReplicationSync, Socket: "/run/l.sock"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := OpenReplicated(bg, c.dsn, c.r); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if c.dsn != ":memory:" {
				if _, err := os.Lstat(c.dsn); !errors.Is(err, os.ErrNotExist) {
					t.Fatal("a refused open created the database")
				}
			}
		})
	}
}

// TestLitestreamFilesPassPreflight: a database Litestream has replicated
// (its .forge.db-litestream directory, the -wal and -shm it keeps, its
// _litestream_* tables) reopens, reports its replica's state, and a
// replica restored by Litestream passes CheckCopy and Restore.
func TestLitestreamFilesPassPreflight(t *testing.T) {
	f := newReplicaFixture(t)
	s := f.open(ReplicationAsync)
	f.start()
	mustSubmit(t, s, textJob("a-1", 2), t0)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, ok, err := s.ReplicaState(bg)
		if err == nil && ok && st.Status == "replicating" && !st.LastSync.IsZero() {
			if lag, ok := st.Lag(time.Now()); !ok || lag > time.Minute {
				t.Fatalf("lag %v (%v)", lag, ok)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica state: %+v %v %v", st, ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.db), ".forge.db-litestream")); err != nil {
		t.Fatalf("litestream's directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := f.open(ReplicationAsync)
	var tables int
	if err := s2.w.do(bg, func(tx *wtx) error {
		return tx.queryRow(`SELECT count(*) FROM sqlite_schema WHERE name LIKE '\_litestream\_%' ESCAPE '\'`).Scan(&tables)
	}); err != nil || tables == 0 {
		t.Fatalf("litestream's tables: %d (%v)", tables, err)
	}
	if _, err := s2.Job(bg, "a-1"); err != nil {
		t.Fatalf("reopened: %v", err)
	}
	st, err := ReadReplicaState(bg, f.socket, f.db)
	if err != nil || st.Status != "replicating" {
		t.Fatalf("ReadReplicaState: %+v %v", st, err)
	}
	f.kill()

	out := filepath.Join(t.TempDir(), "restored.db")
	if b, err := exec.Command(f.bin, "restore", "-o", out, "file://"+f.replica).CombinedOutput(); err != nil {
		t.Fatalf("litestream restore: %v: %s", err, b)
	}
	if _, err := CheckCopy(bg, out); err != nil {
		t.Fatalf("CheckCopy of the restored replica: %v", err)
	}
	target := filepath.Join(privateDir(t), "forge.db")
	if _, err := Restore(bg, out, target, time.Now()); err != nil {
		t.Fatalf("Restore of the restored replica: %v", err)
	}
	s3 := mustOpen(t, target)
	if _, err := s3.Job(bg, "a-1"); err != nil {
		t.Fatalf("restored: %v", err)
	}
	if _, err := ReadReplicaState(bg, f.socket, f.db); err == nil || strings.Contains(err.Error(), f.socket) {
		t.Fatalf("ReadReplicaState without litestream: %v", err)
	}
}

// TestSyncedAnswersDuringOutage: once a sync has failed past the retry
// budget, a later write of the same outage is answered ErrUnreplicated at
// once, while Litestream still hangs (the old store waited for a sync of
// its own, retried for the whole budget again, behind the one in flight),
// a read keeps its answer, and writes are acknowledged again once a sync
// succeeds, with no write needed to find that out.
func TestSyncedAnswersDuringOutage(t *testing.T) {
	var mu sync.Mutex
	mode := "fail" // fail, hang (until release is closed), ok
	release := make(chan struct{})
	a := newSyncedAnswers(func() error {
		mu.Lock()
		m := mode
		mu.Unlock()
		switch m {
		case "hang":
			<-release
			return errors.New("litestream hung")
		case "fail":
			return errors.New("litestream unreachable")
		}
		return nil
	}, 0)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(a.stop)
	t.Cleanup(unblock) // runs first: a failed test leaves no sync hanging
	setMode := func(m string) {
		mu.Lock()
		mode = m
		mu.Unlock()
	}
	write := func(read bool) <-chan error {
		o := &op{read: read, done: make(chan error, 1)}
		if !read {
			a.commit()
		}
		a.reply([]*op{o}, []error{nil})
		return o.done
	}
	wait := func(c <-chan error) error {
		t.Helper()
		select {
		case err := <-c:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the write was not answered while litestream hangs")
		}
		return nil
	}

	if err := wait(write(false)); !errors.Is(err, ErrUnreplicated) {
		t.Fatalf("first write of the outage: %v, want ErrUnreplicated", err)
	}
	setMode("hang")
	if err := wait(write(false)); !errors.Is(err, ErrUnreplicated) {
		t.Fatalf("second write of the outage: %v, want ErrUnreplicated", err)
	}
	if err := wait(write(true)); err != nil {
		t.Fatalf("a read during the outage: %v", err)
	}
	setMode("ok")
	unblock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := wait(write(false))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnreplicated) || time.Now().After(deadline) {
			t.Fatalf("write once litestream is back: %v", err)
		}
	}
}

package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// smallFS mounts a tmpfs of size bytes (mode 0700: the store's preflight
// accepts it as the database's directory). It needs root; under CI a
// missing root fails instead of skipping.
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

// fillUp writes path until the file system refuses more.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
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
			return
		}
	}
}

// A Gate restarting on a file system its database and WAL filled starts
// (today's Gate stopped at "mark lanes disconnected: ... disk is full"):
// read-only, /readyz 503 storage_full, reads served, Worker connections
// refused until its startup writes have run. Once space is back (real
// statfs against a 1 MiB floor) it leaves the mode by itself, lets the
// Worker in and leases it the queued job.
func TestGateStartsOnAFullDisk(t *testing.T) {
	dir := smallFS(t, 8<<20)
	reserve := filepath.Join(dir, "reserve")
	if err := os.WriteFile(reserve, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "forge.db")
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	if err := st.ConnectLane(ctx, "worker-1", "worker-1", 0, strings.Repeat("ab", 16), clk.Now()); err != nil {
		t.Fatal(err)
	}
	cfg, sec := testConfig(t, func(m map[string]any) { m["free_space_floor_bytes"] = 1 << 20 })
	var jobs []string
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("%032x", i+1)
		nj := store.NewJob{ID: id, Kind: store.KindText, Task: []byte(`{"input":"` + strings.Repeat("x", 16<<10) + `"}`),
			Pool: cfg.DefaultPool, Policy: mustTextPolicy(t, cfg)}
		if _, err := st.Submit(ctx, nj, clk.Now()); err != nil {
			break
		}
		jobs = append(jobs, id)
	}
	fillUp(t, filepath.Join(dir, "ballast"))
	// Use up what the WAL still has room for: each write appends a page
	// the failing checkpoint cannot take back.
	for i := 0; i < 100000; i++ {
		if err := st.ConnectLane(ctx, "worker-1", "worker-1", 0, fmt.Sprintf("%032x", i+1), clk.Now()); err != nil {
			if !errors.Is(err, store.ErrFull) && !errors.Is(err, store.ErrStorageIO) {
				t.Fatalf("filling the WAL: %v", err)
			}
			break
		}
	}
	st.Close()

	tg := startGateSetup(t, cfg, sec, db, clk.Now, discardWriter{}, nil)
	tg.clock = clk
	if code, body := tg.api("GET", "/readyz", "", nil); code != http.StatusServiceUnavailable || !contains(body, "storage_full") {
		t.Fatalf("/readyz on a full disk: %d %s", code, body)
	}
	if code, body := tg.api("GET", "/v1/jobs/"+jobs[0], testOwnerToken, nil); code != http.StatusOK {
		t.Fatalf("read on a full disk: %d %s", code, body)
	}
	if c, err := dialWorker(t, tg.addr, testWorkerToken); err == nil {
		c.Close()
		t.Fatal("a Worker connected before the startup writes ran")
	}
	for _, p := range []string{filepath.Join(dir, "ballast"), reserve} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	tg.waitReadyz(http.StatusOK)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	l := w.lease()
	if l.JobID != jobs[0] {
		t.Fatalf("leased %s, want the oldest queued job %s", l.JobID, jobs[0])
	}
	wantAck(t, w.textResult(l, "done"))
}

// mustTextPolicy is the canonical policy the Gate gives text jobs.
func mustTextPolicy(t *testing.T, cfg *Config) []byte {
	t.Helper()
	g, err := New(cfg, &Secrets{}, nil, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return g.textPolicy
}

// A Gate that cannot even open its store (a clean stop removed the -shm
// wal-index, and the full file system has no room for a new one) waits for
// space instead of exiting, and opens the store once space is back.
func TestOpenStoreWaitsForSpace(t *testing.T) {
	dir := smallFS(t, 4<<20)
	db := filepath.Join(dir, "forge.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	filler := filepath.Join(dir, "filler")
	fillUp(t, filler)
	if _, err := store.Open(context.Background(), db); err == nil {
		t.Fatal("the store opened on a full file system: nothing to wait for")
	}
	cfg, _ := testConfig(t, func(m map[string]any) { m["database"] = db })
	opened := make(chan error, 1)
	go func() {
		st, err := openStore(context.Background(), cfg, discardLog())
		if err == nil {
			st.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("openStore returned on a full file system: %v", err)
	case <-time.After(2 * openRetry):
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("openStore after space came back: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("openStore did not open the store once space was back")
	}
}

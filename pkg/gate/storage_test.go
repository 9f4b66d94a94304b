package gate

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// fakeSpace is a SpaceSource whose free space the test sets.
type fakeSpace struct {
	mu          sync.Mutex
	free, total uint64
}

func (f *fakeSpace) Space() (store.Space, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return store.Space{Free: f.free, Total: f.total}, nil
}

func (f *fakeSpace) set(free uint64) {
	f.mu.Lock()
	f.free = free
	f.mu.Unlock()
}

// startSpaceGate starts a Gate on a fresh file database whose state file
// system is fs, with a floor of 8 MiB.
func startSpaceGate(t *testing.T, fs *fakeSpace, db string) *testGate {
	t.Helper()
	cfg, sec := testConfig(t, func(m map[string]any) { m["free_space_floor_bytes"] = 8 << 20 })
	clk := newClock()
	tg := startGateSetup(t, cfg, sec, db, clk.Now, discardWriter{}, func(g *Gate) { g.storage.src = fs })
	tg.clock = clk
	return tg
}

type discardWriter struct{}

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// waitReadyz polls /readyz until it answers want (a wait with a safety
// limit, not a timing assertion: the Gate reads the free space every
// spaceCheckEvery).
func (tg *testGate) waitReadyz(want int) []byte {
	tg.t.Helper()
	limit := time.Now().Add(waitLimit)
	for {
		code, body := tg.api("GET", "/readyz", "", nil)
		if code == want {
			return body
		}
		if time.Now().After(limit) {
			tg.t.Fatalf("/readyz stayed %d %s, want %d", code, body, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Below the floor the Gate is in storage_full: submits answer 507
// storage_full, reads and the debug viewer work, /readyz answers 503
// storage_full, a running lease keeps heartbeating and its result is
// recorded without leasing the queued job; once space is back the Gate
// leaves the mode by itself, leases the queued job and takes submits.
func TestStorageFullBelowTheFloor(t *testing.T) {
	fs := &fakeSpace{free: 100 << 20, total: 1 << 30}
	tg := startSpaceGate(t, fs, "")
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	first := tg.submit(`{"input":"a"}`)
	l1 := w.lease()
	queued := tg.submit(`{"input":"b"}`)

	fs.set(4 << 20)
	if body := tg.waitReadyz(http.StatusServiceUnavailable); !contains(body, `"storage_full"`) {
		t.Fatalf("/readyz in the mode: %s", body)
	}
	if code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"input":"c"}`)); code != http.StatusInsufficientStorage || !contains(body, `"code":"storage_full"`) {
		t.Fatalf("submit in the mode: %d %s", code, body)
	}
	if code, body := tg.api("GET", "/v1/jobs/"+first.ID, testOwnerToken, nil); code != http.StatusOK {
		t.Fatalf("read in the mode: %d %s", code, body)
	}
	if code, body := tg.api("GET", "/v1/debug/jobs", testOwnerToken, nil); code != http.StatusOK {
		t.Fatalf("debug viewer in the mode: %d %s", code, body)
	}
	wantAck(t, w.heartbeat(l1))
	wantAck(t, w.textResult(l1, "done"))
	if j := tg.job(first.ID); j.Status != "succeeded" {
		t.Fatalf("result in the mode: job %+v", j)
	}
	// CompleteAndLease would have leased it in the result's commit.
	if j := tg.job(queued.ID); j.Status != "pending" {
		t.Fatalf("a job was leased in the mode: %+v", j)
	}

	fs.set(100 << 20)
	tg.waitReadyz(http.StatusOK)
	l2 := w.lease()
	if l2.JobID != queued.ID {
		t.Fatalf("after the mode the lane got %s, want %s", l2.JobID, queued.ID)
	}
	wantAck(t, w.textResult(l2, "done"))
	tg.submit(`{"input":"d"}`)
}

// A write SQLite refuses for lack of space puts the Gate in storage_full
// instead of stopping it; the mode then refuses Worker writes with
// unavailable on an open connection, pauses the sweep, and on leaving
// gives the running lease a fresh deadline, so the lease whose heartbeats
// could not be stored is not expired.
func TestStorageFullAfterAFailedWrite(t *testing.T) {
	fs := &fakeSpace{free: 100 << 20, total: 1 << 30}
	tg := startSpaceGate(t, fs, "")
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"a"}`)
	l1 := w.lease()

	// Keep the reading below the floor, or the Gate's test write would
	// end the mode at once; then the store answers what it does when
	// SQLite says SQLITE_FULL.
	fs.set(4 << 20)
	if !tg.g.storeFailed(store.ErrFull) {
		t.Fatal("ErrFull is not a store failure")
	}
	if code, body := tg.api("GET", "/readyz", "", nil); code != http.StatusServiceUnavailable || !contains(body, "storage_full") {
		t.Fatalf("/readyz after a failed write: %d %s", code, body)
	}
	wantReject(t, w.heartbeat(l1), wire.RejectUnavailable)
	wantReject(t, w.textResult(l1, "done"), wire.RejectUnavailable)
	// The deadline (30 s TTL) passes while the mode lasts; the sweep
	// does not expire the attempt.
	tg.clock.Advance(45 * time.Second)
	if j := tg.job(job.ID); j.Status != "leased" {
		t.Fatalf("job in the mode after its deadline: %+v", j)
	}
	fs.set(100 << 20)
	tg.waitReadyz(http.StatusOK)
	wantAck(t, w.heartbeat(l1))
	wantAck(t, w.textResult(l1, "done"))
	if j := tg.job(job.ID); j.Status != "succeeded" {
		t.Fatalf("the result sent again after the mode: %+v", j)
	}
	select {
	case err := <-tg.done:
		t.Fatalf("the Gate stopped: %v", err)
	default:
	}
}

// The floor: configured, or the larger of 64 MiB and 5 %.
func TestFloor(t *testing.T) {
	for _, c := range []struct {
		total uint64
		cfg   int64
		want  uint64
	}{
		{1 << 30, 0, 64 << 20},
		{100 << 30, 0, 5 << 30},
		{1 << 30, 8 << 20, 8 << 20},
	} {
		if got := store.Floor(c.total, c.cfg); got != c.want {
			t.Errorf("Floor(%d, %d) = %d, want %d", c.total, c.cfg, got, c.want)
		}
	}
}

package gate

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// A failed result whose code is well-formed but not in the failure table is
// refused (reject invalid, nothing recorded), yet it ends the attempt on the
// Worker: the lane is not left busy. When the attempt expires the Gate sends
// no cancel (the lane is idle) and leases the lane the queued job; a Worker
// that never answers a cancel is not stranded for ever.
func TestUnknownFailureCodeDoesNotStrandTheLane(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	first := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	queued := tg.submit(`{"input":"y"}`)
	wantReject(t, w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l1.JobID, AttemptID: l1.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: wire.DispositionRetryable, FailureCode: "no_such_failure"}}), wire.RejectInvalid)
	if j := tg.job(first.ID); j.Status != "leased" || j.FailureCode != "" {
		t.Fatalf("the refused result changed the job: %+v", j)
	}
	tg.g.lanes.mu.Lock()
	state := tg.g.lanes.lanes[w.welcome.Lane].state
	tg.g.lanes.mu.Unlock()
	if state == laneBusy || state == laneRecording {
		t.Fatalf("lane left in state %d after its result was answered", state)
	}
	// The attempt stays leased until it expires; then the lane is leased.
	tg.clock.Advance(31 * time.Second)
	e := w.push()
	if e.Type != wire.TypeLease {
		t.Fatalf("after expiry the lane got %s, want a lease", e.Type)
	}
	if e.Lease.JobID != queued.ID && e.Lease.JobID != first.ID {
		t.Fatalf("lease %+v", e.Lease)
	}
	wantAck(t, w.textResult(e.Lease, "ok"))
}

// A lane that winds down longer than windingLimit (the Worker never says
// idle after a cancel) is closed and its connection dropped; a fresh
// connection of the slot is leased again.
func TestWindingLaneIsDroppedAfterTheLimit(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	logs := &lockedBuffer{}
	clk := newClock()
	tg := startGateLogging(t, cfg, sec, "", clk.Now, logs)
	tg.clock = clk
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	tg.clock.Advance(31 * time.Second)
	if c := w.push(); c.Cancel == nil || c.Cancel.AttemptID != l1.AttemptID || c.Cancel.Reason != wire.CancelExpired {
		t.Fatalf("want cancel for %s, got %+v", l1.AttemptID, c)
	}
	tg.waitJob(job.ID, "retry_wait")
	// Within the limit the lane stays connected (and leased nothing).
	tg.clock.Advance(windingLimit - time.Second)
	time.Sleep(50 * time.Millisecond) // a few sweeps at recovery_interval 10ms
	select {
	case <-w.closed:
		t.Fatal("winding lane dropped before the limit")
	case e := <-w.pushes:
		t.Fatalf("winding lane got %s", e.Type)
	default:
	}
	tg.clock.Advance(2 * time.Second)
	select {
	case <-w.closed:
	case <-time.After(waitLimit):
		t.Fatal("winding lane still connected after the limit")
	}
	if !strings.Contains(logs.String(), `"msg":"lane closed: no idle after cancel","lane":"worker-1"`) {
		t.Fatalf("no log line for the dropped lane:\n%s", logs.String())
	}
	w2 := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	l2 := w2.lease()
	if l2.JobID != job.ID || l2.Ordinal != 2 {
		t.Fatalf("retry %+v", l2)
	}
	wantAck(t, w2.textResult(l2, "ok"))
}

// lockedBuffer is a bytes.Buffer safe for the Gate's concurrent log writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

package gate

import (
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

func (w *rawWorker) goodbye(running *wire.Lease) wire.Envelope {
	bye := &wire.Goodbye{}
	if running != nil {
		bye.JobID, bye.AttemptID = running.JobID, running.AttemptID
	}
	return w.request(wire.Envelope{Type: wire.TypeGoodbye, Goodbye: bye})
}

func (w *rawWorker) idle(l *wire.Lease) {
	w.t.Helper()
	if err := w.c.Send(wire.Envelope{Type: wire.TypeIdle, Idle: &wire.Idle{JobID: l.JobID, AttemptID: l.AttemptID}}); err != nil {
		w.t.Fatal(err)
	}
}

// A goodbye that does not name the lease the lane holds returns it to the
// queue before its ack, without consuming an attempt; another lane then
// gets it as attempt 1.
func TestGoodbyeReturnsUnstartedLease(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	wantAck(t, w.goodbye(nil))
	if j := tg.job(job.ID); j.Status != "pending" || j.AttemptCount != 0 {
		t.Fatalf("after goodbye: %+v", j)
	}
	// The draining lane's late result for the lease it gave back is refused.
	wantReject(t, w.textResult(l1, "late"), wire.RejectStale)
	other := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	l2 := other.lease()
	if l2.JobID != job.ID || l2.Ordinal != 1 {
		t.Fatalf("lease after release %+v", l2)
	}
	wantAck(t, other.textResult(l2, "ok"))
	if j := tg.job(job.ID); j.Status != "succeeded" || j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
}

// A result sent after goodbye is recorded without leasing the lane its
// next job, and nothing is leased to the lane afterwards.
func TestResultAfterGoodbyeLeasesNothing(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	first := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	queued := tg.submit(`{"input":"y"}`)
	wantAck(t, w.goodbye(l1))
	wantAck(t, w.failResult(l1, wire.FailureWorkerShutdown))
	if j := tg.job(first.ID); j.Status != "retry_wait" || j.AttemptCount != 1 {
		t.Fatalf("running job %+v", j)
	}
	if j := tg.job(queued.ID); j.Status != "pending" || j.AttemptCount != 0 {
		t.Fatalf("queued job leased to a draining lane: %+v", j)
	}
	// A submit and a due retry do not reach the draining lane either.
	tg.submit(`{"input":"z"}`)
	tg.clock.Advance(2 * time.Second)
	wantAck(t, w.goodbye(nil)) // a second goodbye is harmless and orders the check after the wakes
	select {
	case e := <-w.pushes:
		t.Fatalf("draining lane got %s", e.Type)
	default:
	}
}

// After cancel{expired} the lane is not leased until the Worker says idle.
func TestCancelledLaneWaitsForIdle(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	queued := tg.submit(`{"input":"y"}`)
	tg.clock.Advance(31 * time.Second)
	if c := w.push(); c.Cancel == nil || c.Cancel.AttemptID != l1.AttemptID {
		t.Fatalf("want cancel, got %+v", c)
	}
	// The sweep that expired the attempt woke every idle lane; a refused
	// heartbeat orders this check after it.
	wantReject(t, w.heartbeat(l1), wire.RejectExpired)
	if j := tg.job(queued.ID); j.Status != "pending" {
		t.Fatalf("queued job leased into the wind-down: %+v", j)
	}
	w.idle(l1)
	l2 := w.lease()
	if l2.JobID != queued.ID || l2.Ordinal != 1 {
		t.Fatalf("lease after idle %+v", l2)
	}
	wantAck(t, w.textResult(l2, "ok"))
}

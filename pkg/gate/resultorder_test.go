package gate

import (
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// A result that leases nothing next: its ack is written before a lease
// that a submit gets for the lane meanwhile. The test holds the lane's send
// lock while the result is recorded and the job submitted, so both writes
// wait for it; the ack must come first. (The Gate changes the lane's state
// and writes the ack under that lock, so no interleaving lets the lease
// overtake; this sequence is the one a Worker meets.)
func TestNoLeaseOvertakesResultAnswer(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	tg.submit(`{"input":"one"}`)
	ls := w.lease()
	g := tg.g
	g.lanes.mu.Lock()
	l := g.lanes.lanes[w.welcome.Lane]
	kind := l.beginResult(ls.JobID, ls.AttemptID)
	g.lanes.mu.Unlock()
	if kind != resultAndLease {
		t.Fatalf("result kind %v", kind)
	}
	fence := store.Fence{JobID: ls.JobID, AttemptID: ls.AttemptID, Lane: l.name, Generation: l.generation}
	out := "HELLO"
	l.sendMu.Lock()
	recorded := make(chan bool, 1)
	go func() {
		recorded <- g.recordAndLease(l, 7, fence, store.Outcome{Succeeded: true, Output: &out}, tg.clock.Now(),
			func(bool, *wire.Ack, wire.RejectCode) bool { t.Error("answered through reply"); return false })
	}()
	// The result is stored (and leased nothing: the queue was empty)
	// before the next job is submitted; otherwise it would lease that job
	// itself, and ack and lease would arrive together.
	tg.waitJob(ls.JobID, "succeeded")
	next := tg.submit(`{"input":"two"}`)
	l.sendMu.Unlock()
	if !<-recorded {
		t.Fatal("recordAndLease failed")
	}
	select {
	case e := <-w.replies:
		if e.Type != wire.TypeAck || e.Seq != 7 {
			t.Fatalf("answer %+v", e)
		}
	case e := <-w.pushes:
		t.Fatalf("%s before the result's ack", e.Type)
	case <-time.After(waitLimit):
		t.Fatal("no ack")
	}
	if got := w.lease(); got.JobID != next.ID {
		t.Fatalf("leased %s, want %s", got.JobID, next.ID)
	}
	if j := tg.waitJob(ls.JobID, "succeeded"); j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
}

// A result for an attempt the sweep withdrew (the lane is winding) ends
// the winding, and its answer too goes out before the lane can be leased.
func TestNoLeaseOvertakesWindingResultAnswer(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	tg.submit(`{"input":"one"}`)
	ls := w.lease()
	g := tg.g
	g.lanes.mu.Lock()
	l := g.lanes.lanes[w.welcome.Lane]
	withdrawn := l.withdraw(ls.AttemptID, time.Now()) // as cancelExpired does
	g.lanes.mu.Unlock()
	if !withdrawn {
		t.Fatal("lane not winding")
	}
	out := "HELLO"
	answers := 0
	reply := func(bool, *wire.Ack, wire.RejectCode) bool {
		answers++
		if got := g.reserveFor(g.cfg.DefaultPool, g.cfg.DefaultExecution.PluginID, ""); got != nil {
			t.Errorf("lane %s could be leased while its result's answer was being sent", got.name)
		}
		return true
	}
	r := &wire.Result{JobID: ls.JobID, AttemptID: ls.AttemptID, Outcome: wire.OutcomeSucceeded, Output: &out}
	if !g.handleResult(l, 1, r, tg.clock.Now(), reply) || answers != 1 {
		t.Fatalf("handleResult: %d answers", answers)
	}
	// Winding is over: the lane takes the next job.
	next := tg.submit(`{"input":"two"}`)
	if got := w.lease(); got.JobID != next.ID {
		t.Fatalf("leased %s, want %s", got.JobID, next.ID)
	}
}

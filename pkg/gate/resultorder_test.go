package gate

import (
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// recordWith records the lane's current result (beginResult, then
// recordAndLease with fence f) and checks, at the moment its answer is
// sent, that no submit or wake could reserve the lane: a lease granted then
// would reach the Worker before the answer it waits for, and the Worker
// drops a connection on which a lease overtakes its result's answer.
func recordWith(t *testing.T, tg *testGate, l *lane, f store.Fence, want bool) {
	t.Helper()
	g := tg.g
	g.lanes.mu.Lock()
	kind := l.beginResult(f.JobID, f.AttemptID)
	g.lanes.mu.Unlock()
	if kind != resultAndLease {
		t.Fatalf("result kind %v, want resultAndLease", kind)
	}
	out := "HELLO"
	answers := 0
	reply := func(ok bool, _ *wire.Ack, _ wire.RejectCode) bool {
		answers++
		if ok != want {
			t.Errorf("answer ok=%v, want %v", ok, want)
		}
		if got := g.reserveFor(g.cfg.DefaultPool, g.cfg.DefaultExecution.PluginID, ""); got != nil {
			t.Errorf("lane %s could be leased while its result's answer was being sent", got.name)
		}
		return true
	}
	if !g.recordAndLease(l, 1, f, store.Outcome{Succeeded: true, Output: &out}, tg.clock.Now(), reply) || answers != 1 {
		t.Fatalf("recordAndLease: %d answers", answers)
	}
}

func TestNoLeaseOvertakesResultAnswer(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	tg.submit(`{"input":"one"}`)
	ls := w.lease()
	tg.g.lanes.mu.Lock()
	l := tg.g.lanes.lanes[w.welcome.Lane]
	tg.g.lanes.mu.Unlock()
	fence := func(ls *wire.Lease) store.Fence {
		return store.Fence{JobID: ls.JobID, AttemptID: ls.AttemptID, Lane: l.name, Generation: l.generation}
	}

	// A recorded result with nothing queued: the ack goes out first.
	recordWith(t, tg, l, fence(ls), true)
	if j := tg.waitJob(ls.JobID, "succeeded"); j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
	// The lane was marked to ask again, not lost: the next job is leased
	// to it.
	next := tg.submit(`{"input":"two"}`)
	ls = w.lease()
	if ls.JobID != next.ID {
		t.Fatalf("leased %s, want %s", ls.JobID, next.ID)
	}

	// A refused result (another generation's fence): the reject goes out
	// before the lane is idle.
	stale := fence(ls)
	stale.Generation = strings.Repeat("0", 32)
	recordWith(t, tg, l, stale, false)
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
	withdrawn := l.withdraw(ls.AttemptID) // as cancelExpired does
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

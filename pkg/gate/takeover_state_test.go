package gate

import (
	"testing"
	"time"
)

// A same-slot takeover while the old connection runs (started), winds down
// or drains (naming it as running) an attempt: the newcomer is leased the
// queued job at once, and the old connection's attempt is retried after its
// deadline (never lost).
func TestTakeoverInEveryLaneState(t *testing.T) {
	for _, state := range []string{"busy", "winding", "draining"} {
		t.Run(state, func(t *testing.T) {
			cfg, sec := testConfig(t, nil)
			tg := startGate(t, cfg, sec, "", nil)
			old := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
			first := tg.submit(`{"input":"x"}`)
			l1 := old.lease()
			switch state {
			case "busy":
				// Started: a takeover leaves it leased (an unstarted one
				// goes back to the queue, TestTakeoverReturnsUnstartedLease).
				wantAck(t, old.heartbeat(l1))
			case "winding":
				tg.clock.Advance(31 * time.Second)
				if c := old.push(); c.Cancel == nil {
					t.Fatalf("want cancel, got %s", c.Type)
				}
			case "draining":
				wantAck(t, old.goodbye(l1))
			}
			queued := tg.submit(`{"input":"y"}`)
			nw := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
			select {
			case <-old.closed:
			case <-time.After(waitLimit):
				t.Fatal("old connection not closed")
			}
			l2 := nw.lease()
			if l2.JobID != queued.ID || l2.Ordinal != 1 {
				t.Fatalf("newcomer's lease %+v", l2)
			}
			wantAck(t, nw.textResult(l2, "ok"))
			if state != "winding" {
				tg.clock.Advance(31 * time.Second)
				tg.waitJob(first.ID, "retry_wait")
			}
			tg.clock.Advance(2 * time.Second) // the retry falls due
			l3 := nw.lease()
			if l3.JobID != first.ID || l3.Ordinal != 2 {
				t.Fatalf("retry of the old connection's attempt %+v", l3)
			}
			wantAck(t, nw.textResult(l3, "ok"))
			if j := tg.job(first.ID); j.Status != "succeeded" || j.AttemptCount != 2 {
				t.Fatalf("job %+v", j)
			}
		})
	}
}

// A takeover returns the old connection's unstarted lease to the queue at
// once, as a goodbye does: here the lease committed with the old
// connection's result (and written after its ack to the superseded
// socket). With max_attempts 1 the job is not failed
// max_attempts_exceeded for an attempt no Worker ran: the newcomer is
// leased it as attempt 1 at once.
func TestTakeoverReturnsUnstartedLease(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		m["lifecycle"] = map[string]any{"lease_ttl": "30s", "retry_base": "1s", "max_attempts": 1}
	})
	tg := startGate(t, cfg, sec, "", nil)
	old := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	tg.submit(`{"input":"x"}`)
	l0 := old.lease()
	queued := tg.submit(`{"input":"y"}`)
	wantAck(t, old.textResult(l0, "ok"))
	if l1 := old.lease(); l1.JobID != queued.ID {
		t.Fatalf("lease with the ack %+v", l1)
	}
	nw := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	select {
	case <-old.closed:
	case <-time.After(waitLimit):
		t.Fatal("old connection not closed")
	}
	l2 := nw.lease()
	if l2.JobID != queued.ID || l2.Ordinal != 1 {
		t.Fatalf("newcomer's lease %+v", l2)
	}
	wantAck(t, nw.textResult(l2, "ok"))
	if j := tg.job(queued.ID); j.Status != "succeeded" || j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
}

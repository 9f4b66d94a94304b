package gate

import (
	"testing"
	"time"
)

// A same-slot takeover while the old connection runs, winds down or drains
// an attempt: the newcomer is leased the queued job at once, and the old
// connection's attempt is retried after its deadline (never lost).
func TestTakeoverInEveryLaneState(t *testing.T) {
	for _, state := range []string{"busy", "winding", "draining"} {
		t.Run(state, func(t *testing.T) {
			cfg, sec := testConfig(t, nil)
			tg := startGate(t, cfg, sec, "", nil)
			old := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
			first := tg.submit(`{"input":"x"}`)
			l1 := old.lease()
			switch state {
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

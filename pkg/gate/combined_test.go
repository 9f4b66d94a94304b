package gate

import (
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// quietConfig: no sweep and no lease poll during the test, so the store's
// commit counters move only by what the test does.
func quietConfig(t *testing.T) (*Config, *Secrets) {
	return testConfig(t, func(m map[string]any) { m["recovery_interval"] = "1h" })
}

// A result for the lane's current attempt is recorded and the lane's next
// attempt leased in one store operation and one commit; the lease follows
// the ACK without any other trigger.
func TestResultCarriesNextLease(t *testing.T) {
	cfg, sec := quietConfig(t)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	j1 := tg.submit(`{"input":"one"}`)
	l1 := w.lease()
	if l1.JobID != j1.ID {
		t.Fatalf("lease %+v", l1)
	}
	j2 := tg.submit(`{"input":"two"}`)
	j3 := tg.submit(`{"input":"three"}`)
	if j := tg.job(j2.ID); j.Status != "pending" {
		t.Fatalf("busy lane took a second job: %+v", j)
	}
	before := tg.st.Stats()
	wantAck(t, w.textResult(l1, "ONE"))
	l2 := w.lease()
	after := tg.st.Stats()
	if l2.JobID != j2.ID || l2.Ordinal != 1 {
		t.Fatalf("next lease %+v, want %s", l2, j2.ID)
	}
	if after.Commits-before.Commits != 1 || after.Operations-before.Operations != 1 {
		t.Fatalf("result + next lease took %d commits, %d operations", after.Commits-before.Commits, after.Operations-before.Operations)
	}
	if j := tg.job(j1.ID); j.Status != "succeeded" || j.Result == nil || *j.Result != "ONE" {
		t.Fatalf("first job %+v", j)
	}
	// A failed result carries the next lease the same way; the retry of
	// job 2 is not due yet, so job 3 comes next.
	wantAck(t, w.failResult(l2, wire.FailurePluginTimeout))
	l3 := w.lease()
	if l3.JobID != j3.ID {
		t.Fatalf("after failure: lease %+v, want %s", l3, j3.ID)
	}
	if j := tg.job(j2.ID); j.Status != "retry_wait" {
		t.Fatalf("second job %+v", j)
	}
	// With nothing left the lane goes idle and a submit reaches it.
	wantAck(t, w.textResult(l3, "THREE"))
	j4 := tg.submit(`{"input":"four"}`)
	if l4 := w.lease(); l4.JobID != j4.ID {
		t.Fatalf("idle lane lease %+v, want %s", l4, j4.ID)
	}
}

// The ACK of a result always precedes the lease it carries (a Worker
// waits for the ACK before it takes new work).
func TestResultAckPrecedesNextLease(t *testing.T) {
	cfg, sec := quietConfig(t)
	tg := startGate(t, cfg, sec, "", nil)
	c, err := dialWorker(t, tg.addr, testWorkerToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 0, Plugins: plugins(), Repositories: noRepos()}}); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Receive(); err != nil || e.Welcome == nil {
		t.Fatalf("welcome %+v %v", e, err)
	}
	for range 3 {
		tg.submit(`{"input":"x"}`)
	}
	e, err := c.Receive()
	if err != nil || e.Lease == nil {
		t.Fatalf("first lease %+v %v", e, err)
	}
	out := "X"
	for seq := uint64(1); seq <= 2; seq++ {
		res := wire.Envelope{Type: wire.TypeResult, Seq: seq, Result: &wire.Result{JobID: e.Lease.JobID, AttemptID: e.Lease.AttemptID, Outcome: wire.OutcomeSucceeded, Output: &out}}
		if err := c.Send(res); err != nil {
			t.Fatal(err)
		}
		ack, err := c.Receive()
		if err != nil || ack.Ack == nil || ack.Seq != seq {
			t.Fatalf("result %d: want its ack first, got %+v %v", seq, ack, err)
		}
		if e, err = c.Receive(); err != nil || e.Lease == nil {
			t.Fatalf("result %d: want the next lease, got %+v %v", seq, e, err)
		}
	}
}

// The combined operation keeps the result's fencing: a result after the
// deadline is refused as expired and leases nothing; an identical replay
// of a recorded result is ACKed without leasing anything more.
func TestResultFencingOnCombinedPath(t *testing.T) {
	cfg, sec := quietConfig(t)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	j1 := tg.submit(`{"input":"one"}`)
	l1 := w.lease()
	j2 := tg.submit(`{"input":"two"}`)
	wantAck(t, w.textResult(l1, "ONE"))
	l2 := w.lease()
	if l2.JobID != j2.ID {
		t.Fatalf("lease %+v", l2)
	}
	// Replay of the first result: idempotent, and job 3 stays queued
	// because the lane is busy with job 2.
	j3 := tg.submit(`{"input":"three"}`)
	wantAck(t, w.textResult(l1, "ONE"))
	// A different result for the finished attempt conflicts.
	wantReject(t, w.textResult(l1, "OTHER"), wire.RejectConflict)
	if j := tg.job(j3.ID); j.Status != "pending" {
		t.Fatalf("replay leased more work: %+v", j)
	}
	// Past the deadline (no sweep has run yet) the current attempt's
	// result is refused and nothing is leased in its place.
	tg.clock.Advance(31 * time.Second)
	wantReject(t, w.textResult(l2, "TWO"), wire.RejectExpired)
	if j := tg.job(j2.ID); j.Status != "leased" {
		t.Fatalf("expired result changed job 2: %+v", j)
	}
	if j := tg.job(j3.ID); j.Status != "pending" {
		t.Fatalf("expired result leased job 3: %+v", j)
	}
	if j := tg.job(j1.ID); j.Status != "succeeded" {
		t.Fatalf("job 1 %+v", j)
	}
}

// A submit that finds an idle lane stores the job and leases it to that
// lane in one store operation and one commit.
func TestSubmitToIdleLaneIsOneCommit(t *testing.T) {
	cfg, sec := quietConfig(t)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	j1 := tg.submit(`{"input":"one"}`)
	l1 := w.lease()
	if l1.JobID != j1.ID {
		t.Fatalf("lease %+v", l1)
	}
	// Once the result is ACKed the lane is idle (nothing else queued).
	wantAck(t, w.textResult(l1, "ONE"))
	before := tg.st.Stats()
	j2 := tg.submit(`{"input":"two"}`)
	l2 := w.lease()
	after := tg.st.Stats()
	if l2.JobID != j2.ID || l2.Ordinal != 1 {
		t.Fatalf("lease %+v, want %s", l2, j2.ID)
	}
	if after.Commits-before.Commits != 1 || after.Operations-before.Operations != 1 {
		t.Fatalf("submit + lease took %d commits, %d operations", after.Commits-before.Commits, after.Operations-before.Operations)
	}
	// The lease is fenced like any other: the result lands.
	wantAck(t, w.textResult(l2, "TWO"))
	if j := tg.job(j2.ID); j.Status != "succeeded" {
		t.Fatalf("job %+v", j)
	}
}

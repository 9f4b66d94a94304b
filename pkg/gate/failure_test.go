package gate

import (
	"context"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Every code of the closed failure table is accepted with its own
// disposition and persisted as sent: on the attempt always, and on the job
// when terminal; a retryable one schedules a retry.
func TestFailureTableCodesPersisted(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	for _, code := range wire.FailureCodes() {
		job := tg.submit(`{"input":"x"}`)
		l := w.lease()
		if l.JobID != job.ID {
			t.Fatalf("%s: leased %s, want %s", code, l.JobID, job.ID)
		}
		wantAck(t, w.failResult(l, code))
		agg, err := tg.st.Aggregate(context.Background(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := wire.DispositionOf(code)
		a := agg.Attempts[0]
		if a.Status != "failed" || a.FailureCode != code || a.Disposition != string(d) {
			t.Fatalf("%s: attempt %+v", code, a)
		}
		j := tg.job(job.ID)
		switch d {
		case wire.DispositionTerminal:
			if j.Status != "failed" || j.FailureCode != code {
				t.Fatalf("%s: job %+v", code, j)
			}
		default:
			if j.Status != "retry_wait" || j.FailureCode != "" {
				t.Fatalf("%s: job %+v", code, j)
			}
		}
	}
}

// A failed result whose code is not in the table, or whose disposition
// does not match the code's, is refused with reject invalid and changes
// nothing: the attempt stays leased and a correct result still lands.
func TestFailureOutsideTableRejectedInvalid(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	bad := []struct {
		code string
		d    wire.Disposition
	}{
		{wire.FailureInvalidTask, wire.DispositionRetryable},
		{wire.FailurePluginTimeout, wire.DispositionTerminal},
		{wire.FailureEmptyChange, wire.DispositionRetryable},
		{"max_attempts_exceeded", wire.DispositionTerminal},
		{"lease_expired", wire.DispositionRetryable},
		{"future_code", wire.DispositionRetryable},
	}
	for _, b := range bad {
		e := w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
			Outcome: wire.OutcomeFailed, Disposition: b.d, FailureCode: b.code}})
		wantReject(t, e, wire.RejectInvalid)
		if j := tg.job(job.ID); j.Status != "leased" {
			t.Fatalf("%s/%s changed the job: %+v", b.code, b.d, j)
		}
	}
	wantAck(t, w.failResult(l, wire.FailurePluginSpawnFailed))
	if j := tg.job(job.ID); j.Status != "retry_wait" {
		t.Fatalf("job %+v", j)
	}
}

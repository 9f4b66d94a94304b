package gate

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// TestBudgetedJobsGoToMeteringLanes: a repository's budget is resolved
// into its jobs' policy; a lane whose Worker does not offer gateway
// usage is never leased them (the later text job goes first), a metering
// lane is, with the usage version and the attempt's budget; the usage
// its result reports is stored and served in the aggregate.
func TestBudgetedJobsGoToMeteringLanes(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		repo0(m)["budget"] = map[string]any{"attempt": map[string]any{"max_tokens": 5000}, "job": map[string]any{"max_requests": 9}}
	})
	tg := startGate(t, cfg, sec, "", nil)
	repos := []string{"agent-forge"}
	plain := connectHello(t, tg.addr, testWorkerToken, &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 0, Plugins: plugins(), Repositories: repos})
	coding := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it."}`)
	text := tg.submit(`{"input":"later"}`)
	if l := plain.lease(); l.JobID != text.ID || l.UsageVersion != "" || l.Budget != nil {
		t.Fatalf("an unmetered lane was leased %+v (want the text job %s)", l, text.ID)
	}

	metered := connectHello(t, tg.addr, testWorkerToken, &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 1,
		Plugins: plugins(), Repositories: repos, UsageVersions: []string{"gateway_usage/v9", wire.UsageV1}})
	l := metered.lease()
	if l.JobID != coding.ID || l.UsageVersion != wire.UsageV1 || l.Budget == nil ||
		l.Budget.MaxTokens == nil || *l.Budget.MaxTokens != 5000 || l.Budget.MaxRequests == nil || *l.Budget.MaxRequests != 9 {
		t.Fatalf("metered lease %+v budget %+v", l, l.Budget)
	}
	if !strings.Contains(string(l.Policy), `"budget":{"attempt":{"max_tokens":5000},"job":{"max_requests":9}}`) {
		t.Fatalf("policy without the budget: %s", l.Policy)
	}
	u := &wire.Usage{Requests: 2, InputTokens: 4000, OutputTokens: 1200, CachedTokens: 3000}
	wantAck(t, metered.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: wire.DispositionTerminal, FailureCode: wire.FailureBudgetExceeded, Usage: u}}))
	code, body := tg.api("GET", "/v1/jobs/"+coding.ID+"/aggregate", testOwnerToken, nil)
	if code != http.StatusOK {
		t.Fatalf("aggregate: %d", code)
	}
	var a store.Aggregate
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	want := store.Usage{Requests: 2, InputTokens: 4000, OutputTokens: 1200, CachedTokens: 3000}
	if a.Job.Status != "failed" || a.Job.FailureCode != wire.FailureBudgetExceeded || a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != want ||
		a.Job.Usage == nil || *a.Job.Usage != want {
		t.Fatalf("aggregate %s", body)
	}
}

// TestMeteredResultNeedsUsage: on a lane that selected gateway usage, a
// result without usage is refused (reject invalid, nothing recorded:
// the budget would lose what the attempt spent); the same result with
// its usage is recorded. A lane that offered no usage needs none.
func TestMeteredResultNeedsUsage(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		repo0(m)["budget"] = map[string]any{"attempt": map[string]any{"max_tokens": 5000}}
	})
	tg := startGate(t, cfg, sec, "", nil)
	repos := []string{"agent-forge"}
	plain := connectHello(t, tg.addr, testWorkerToken, &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 1, Plugins: plugins(), Repositories: repos})
	coding := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it."}`)
	text := tg.submit(`{"input":"x"}`)
	pl := plain.lease()
	if pl.JobID != text.ID {
		t.Fatalf("lease %+v", pl)
	}
	out := "done"
	wantAck(t, plain.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: pl.JobID, AttemptID: pl.AttemptID,
		Outcome: wire.OutcomeSucceeded, Output: &out}}))

	metered := connectHello(t, tg.addr, testWorkerToken, &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 0,
		Plugins: plugins(), Repositories: repos, UsageVersions: []string{wire.UsageV1}})
	l := metered.lease()
	if l.JobID != coding.ID || l.Budget == nil {
		t.Fatalf("lease %+v", l)
	}
	res := &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: wire.DispositionRetryable, FailureCode: wire.FailurePluginFailed}
	wantReject(t, metered.request(wire.Envelope{Type: wire.TypeResult, Result: res}), wire.RejectInvalid)
	if a := tg.aggregate(coding.ID); len(a.Attempts) != 1 || a.Attempts[0].Status != store.AttemptLeased {
		t.Fatalf("a result without usage was recorded: %+v", a.Attempts)
	}
	res.Usage = &wire.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5}
	wantAck(t, metered.request(wire.Envelope{Type: wire.TypeResult, Result: res}))
	if a := tg.aggregate(coding.ID); a.Attempts[0].Usage == nil || a.Attempts[0].Usage.Requests != 1 {
		t.Fatalf("attempt %+v", a.Attempts[0])
	}
}

func (tg *testGate) aggregate(id string) store.Aggregate {
	tg.t.Helper()
	code, body := tg.api("GET", "/v1/jobs/"+id+"/aggregate", testOwnerToken, nil)
	if code != http.StatusOK {
		tg.t.Fatalf("aggregate: %d", code)
	}
	var a store.Aggregate
	if err := json.Unmarshal(body, &a); err != nil {
		tg.t.Fatal(err)
	}
	return a
}

// TestHeartbeatUsageCountsAfterExpiry: a metering lane's heartbeats
// carry the attempt's usage so far, which the Gate records (never
// lowering it); the attempt then expires without a result, and the
// retry's lease is given what that usage left of the job's budget. A
// heartbeat with usage on a lane that did not select it is refused.
func TestHeartbeatUsageCountsAfterExpiry(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		repo0(m)["budget"] = map[string]any{"job": map[string]any{"max_requests": 9, "max_tokens": 5000}}
	})
	tg := startGate(t, cfg, sec, "", nil)
	repos := []string{"agent-forge"}
	w := connectHello(t, tg.addr, testWorkerToken, &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 0,
		Plugins: plugins(), Repositories: repos, UsageVersions: []string{wire.UsageV1}})
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it."}`)
	l1 := w.lease()
	if l1.JobID != job.ID || l1.Budget == nil || *l1.Budget.MaxRequests != 9 || *l1.Budget.MaxTokens != 5000 {
		t.Fatalf("first lease %+v", l1)
	}
	beat := func(u *wire.Usage) wire.Envelope {
		return w.request(wire.Envelope{Type: wire.TypeHeartbeat, Heartbeat: &wire.Heartbeat{JobID: l1.JobID, AttemptID: l1.AttemptID, Usage: u}})
	}
	wantAck(t, beat(&wire.Usage{Requests: 4, InputTokens: 1000, OutputTokens: 200, CachedTokens: 500}))
	wantAck(t, beat(&wire.Usage{Requests: 3})) // lower: changes nothing
	want := store.Usage{Requests: 4, InputTokens: 1000, OutputTokens: 200, CachedTokens: 500}
	if a := tg.aggregate(job.ID); a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != want {
		t.Fatalf("after the heartbeats: %+v", a.Attempts[0].Usage)
	}

	tg.clock.Advance(31 * time.Second)
	if c := w.push(); c.Cancel == nil || c.Cancel.Reason != wire.CancelExpired {
		t.Fatalf("want the expiry's cancel, got %+v", c)
	}
	if err := w.c.Send(wire.Envelope{Type: wire.TypeIdle, Idle: &wire.Idle{JobID: l1.JobID, AttemptID: l1.AttemptID}}); err != nil {
		t.Fatal(err)
	}
	tg.clock.Advance(time.Second)
	l2 := w.lease()
	if l2.JobID != job.ID || l2.Ordinal != 2 || l2.Budget == nil || *l2.Budget.MaxRequests != 5 || *l2.Budget.MaxTokens != 3800 {
		t.Fatalf("retry lease %+v budget %+v, want 5 requests and 3800 tokens left", l2, l2.Budget)
	}
	if a := tg.aggregate(job.ID); a.Job.Usage == nil || *a.Job.Usage != want {
		t.Fatalf("job usage %+v", a.Job.Usage)
	}

	plain := connectHello(t, tg.addr, testWorkerToken, &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 1, Plugins: plugins(), Repositories: nil})
	text := tg.submit(`{"input":"x"}`)
	pl := plain.lease()
	if pl.JobID != text.ID {
		t.Fatalf("lease %+v", pl)
	}
	wantReject(t, plain.request(wire.Envelope{Type: wire.TypeHeartbeat, Heartbeat: &wire.Heartbeat{JobID: pl.JobID, AttemptID: pl.AttemptID,
		Usage: &wire.Usage{Requests: 1}}}), wire.RejectInvalid)
}

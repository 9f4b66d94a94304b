package store

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

func budgetedJob(id string, maxAttempts int, b *policy.Budget) NewJob {
	p, err := policy.Decode(testPolicy(30*time.Second, time.Millisecond, maxAttempts, "reference"))
	if err != nil {
		panic(err)
	}
	p.Budget = b
	return NewJob{ID: id, Kind: KindText, Task: []byte(`{"input":"hello"}`), Pool: "coding", Policy: p.Canonical()}
}

func i64(v int64) *int64 { return &v }

func limits(b *Budget) (tokens, requests int64) {
	tokens, requests = -1, -1 // unbounded
	if b.MaxTokens != nil {
		tokens = *b.MaxTokens
	}
	if b.MaxRequests != nil {
		requests = *b.MaxRequests
	}
	return tokens, requests
}

// TestLeaseBudgetIsTheRemainder: each lease of a budgeted job carries
// the per-attempt limit, lowered to what the earlier attempts' reported
// usage left of the per-job limit; an attempt that reported nothing
// (expired) counts nothing; a job without a budget leases none.
func TestLeaseBudgetIsTheRemainder(t *testing.T) {
	s, _ := openFile(t)
	mustConnect(t, s, "worker-1", gen(1), t0)
	mustSubmit(t, s, textJob("plain", 1), t0)
	if l := mustLease(t, s, "worker-1", gen(1), t0); l.Budget != nil {
		t.Fatalf("a job without a budget leased %+v", l.Budget)
	} else if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK("x"), t0); err != nil {
		t.Fatal(err)
	}

	b := &policy.Budget{Attempt: &policy.Limits{MaxTokens: i64(100)}, Job: &policy.Limits{MaxTokens: i64(150), MaxRequests: i64(5)}}
	mustSubmit(t, s, budgetedJob("j", 4, b), t0)
	now := t0
	steps := []struct {
		usage                *Usage // the attempt's report; nil: it expires
		wantTokens, wantReqs int64
	}{
		{&Usage{Requests: 2, InputTokens: 60, OutputTokens: 30, CachedTokens: 50}, 100, 5}, // nothing spent yet
		{nil, 60, 3}, // 90 tokens and 2 requests spent
		{&Usage{Requests: 3, InputTokens: 70}, 60, 3}, // the expired attempt counted nothing
		{nil, 0, 0}, // 160 tokens spent: nothing left
	}
	for i, st := range steps {
		now = now.Add(time.Second)
		l := mustLease(t, s, "worker-1", gen(1), now)
		if l.Budget == nil {
			t.Fatalf("attempt %d: no budget", i+1)
		}
		if tok, req := limits(l.Budget); tok != st.wantTokens || req != st.wantReqs {
			t.Fatalf("attempt %d: budget %d tokens %d requests, want %d %d", i+1, tok, req, st.wantTokens, st.wantReqs)
		}
		if st.usage == nil {
			if _, err := s.Sweep(bg, now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Minute)
			continue
		}
		o := retryable()
		o.Usage = st.usage
		if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), o, now); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Aggregate(bg, "j")
	if err != nil {
		t.Fatal(err)
	}
	if a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != *steps[0].usage || a.Attempts[1].Usage != nil {
		t.Fatalf("attempts %+v", a.Attempts)
	}
	want := Usage{Requests: 5, InputTokens: 130, OutputTokens: 30, CachedTokens: 50}
	if a.Job.Usage == nil || *a.Job.Usage != want {
		t.Fatalf("job usage %+v, want %+v", a.Job.Usage, want)
	}
	if j := mustJob(t, s, "j"); j.Usage == nil || *j.Usage != want {
		t.Fatalf("Job's usage %+v, want %+v", j.Usage, want)
	}
	if j := mustJob(t, s, "plain"); j.Usage != nil {
		t.Fatalf("an unmetered job shows usage %+v", j.Usage)
	}
}

// TestUsageIsPartOfTheOutcome: usage out of range is refused, and a
// replay that reports different usage is a conflict, not a replay.
func TestUsageIsPartOfTheOutcome(t *testing.T) {
	s, _ := openFile(t)
	mustConnect(t, s, "worker-1", gen(1), t0)
	mustSubmit(t, s, textJob("j", 1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	for _, u := range []Usage{{Requests: -1}, {CachedTokens: MaxUsage + 1}} {
		o := textOK("x")
		o.Usage = &u
		if _, err := s.Complete(bg, f, o, t0); !errors.Is(err, ErrInvalid) {
			t.Fatalf("usage %+v: %v", u, err)
		}
	}
	o := textOK("x")
	o.Usage = &Usage{Requests: 1, InputTokens: 2, OutputTokens: 3, CachedTokens: 1}
	if _, err := s.Complete(bg, f, o, t0); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Complete(bg, f, o, t0); err != nil || !c.Replayed {
		t.Fatalf("identical replay: %+v %v", c, err)
	}
	other := textOK("x")
	other.Usage = &Usage{Requests: 2, InputTokens: 2, OutputTokens: 3, CachedTokens: 1}
	if _, err := s.Complete(bg, f, other, t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("different usage replayed: %v", err)
	}
}

// TestUsageMigrationLeavesOldRowsUnmetered: a version 1 database (no
// usage columns) migrates; its attempts show no usage (not zero), and
// attempts recorded afterwards keep theirs.
func TestUsageMigrationLeavesOldRowsUnmetered(t *testing.T) {
	s, path := openFile(t)
	mustConnect(t, s, "worker-1", gen(1), t0)
	mustSubmit(t, s, textJob("old", 1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK("x"), t0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Back to version 1: the columns step 2 adds are not there, nor what
	// later steps add.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range undoIntakeState(append(undoFollowups,
		"DROP TABLE intake_triggers",
		"ALTER TABLE attempts DROP COLUMN usage_requests", "ALTER TABLE attempts DROP COLUMN usage_input_tokens",
		"ALTER TABLE attempts DROP COLUMN usage_output_tokens", "ALTER TABLE attempts DROP COLUMN usage_cached_tokens",
		"UPDATE schema_version SET version = 1",
	)...) {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	s = mustOpen(t, path)
	a, err := s.Aggregate(bg, "old")
	if err != nil {
		t.Fatal(err)
	}
	if a.Attempts[0].Usage != nil || a.Job.Usage != nil {
		t.Fatalf("an old attempt shows usage %+v / %+v", a.Attempts[0].Usage, a.Job.Usage)
	}
	mustConnect(t, s, "worker-1", gen(2), t0)
	mustSubmit(t, s, textJob("new", 1), t0)
	l = mustLease(t, s, "worker-1", gen(2), t0)
	o := textOK("x")
	o.Usage = &Usage{Requests: 4, InputTokens: 10, OutputTokens: 5}
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(2)), o, t0); err != nil {
		t.Fatal(err)
	}
	if a, err = s.Aggregate(bg, "new"); err != nil || a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != *o.Usage {
		t.Fatalf("new attempt %+v %v", a.Attempts, err)
	}
	if v, err := ReadSchemaVersion(bg, path); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d %v", v, err)
	}
}

// TestHeartbeatUsageOutlivesTheAttempt: usage recorded with heartbeats
// is never lowered (by a later heartbeat or by the result), counts for
// an attempt that expires without a result, and so lowers the retry's
// budget; usage out of range is refused.
func TestHeartbeatUsageOutlivesTheAttempt(t *testing.T) {
	s, _ := openFile(t)
	mustConnect(t, s, "worker-1", gen(1), t0)
	b := &policy.Budget{Job: &policy.Limits{MaxTokens: i64(150), MaxRequests: i64(5)}}
	mustSubmit(t, s, budgetedJob("j", 3, b), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	if _, err := s.HeartbeatUsage(bg, f, &Usage{Requests: -1}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative usage: %v", err)
	}
	first := Usage{Requests: 2, InputTokens: 60, OutputTokens: 30, CachedTokens: 50}
	for _, u := range []*Usage{&first, {Requests: 1, InputTokens: 70}, nil} {
		if _, err := s.HeartbeatUsage(bg, f, u, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	want := Usage{Requests: 2, InputTokens: 70, OutputTokens: 30, CachedTokens: 50}
	if a, _ := s.Aggregate(bg, "j"); a.Attempts[0].Usage == nil || *a.Attempts[0].Usage != want {
		t.Fatalf("after the heartbeats %+v, want %+v", a.Attempts[0].Usage, want)
	}
	if _, err := s.Sweep(bg, t0.Add(time.Minute)); err != nil { // expires
		t.Fatal(err)
	}
	l2 := mustLease(t, s, "worker-1", gen(1), t0.Add(2*time.Minute))
	if tok, req := limits(l2.Budget); tok != 50 || req != 3 {
		t.Fatalf("retry budget %d tokens %d requests, want 50 and 3", tok, req)
	}
	f2 := fenceOf(l2, "worker-1", gen(1))
	if _, err := s.HeartbeatUsage(bg, f2, &Usage{Requests: 3, InputTokens: 40}, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	o := retryable()
	o.Usage = &Usage{Requests: 1, OutputTokens: 5}
	if _, err := s.Complete(bg, f2, o, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	a, err := s.Aggregate(bg, "j")
	if err != nil {
		t.Fatal(err)
	}
	if u := a.Attempts[1].Usage; u == nil || *u != (Usage{Requests: 3, InputTokens: 40, OutputTokens: 5}) {
		t.Fatalf("second attempt %+v", u)
	}
	if u := a.Job.Usage; u == nil || u.Requests != 5 || u.InputTokens+u.OutputTokens != 145 {
		t.Fatalf("job usage %+v", u)
	}
}

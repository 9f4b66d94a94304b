package store

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func eventCount(c Counters, typ, code string, attempt bool) int64 {
	for _, e := range c.Events {
		if e.EventKey == (EventKey{typ, code, attempt}) {
			return e.N
		}
	}
	return 0
}

// TestCountersFollowCommits: the writer counts what each committed
// transaction carried (operations, events by type and code, first-lease
// waits on the Gate's clock) and nothing of a failed operation.
func TestCountersFollowCommits(t *testing.T) {
	s := mustOpen(t, ":memory:")
	base := s.Counters()
	mustSubmit(t, s, textJob("j1", 2), t0)
	mustSubmit(t, s, textJob("j2", 1), t0.Add(time.Second))
	if _, err := s.Submit(bg, textJob("j1", 2), t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate submit: %v", err)
	}
	mustConnect(t, s, "worker-1", gen(1), t0)
	// j1 waits 1.5 s for its first lease, j2 1.5 s too (j1 retries at
	// 3 s).
	l1 := mustLease(t, s, "worker-1", gen(1), t0.Add(1500*time.Millisecond))
	if _, err := s.Complete(bg, fenceOf(l1, "worker-1", gen(1)), retryable(), t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	l2 := mustLease(t, s, "worker-1", gen(1), t0.Add(2500*time.Millisecond))
	if l2.JobID != "j2" {
		t.Fatalf("leased %s", l2.JobID)
	}
	if _, err := s.Complete(bg, fenceOf(l2, "worker-1", gen(1)), textOK("x"), t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// j1's second lease (ordinal 2) is no first lease.
	l3 := mustLease(t, s, "worker-1", gen(1), t0.Add(10*time.Second))
	if l3.JobID != "j1" || l3.Ordinal != 2 {
		t.Fatalf("lease %+v", l3)
	}
	if _, err := s.Complete(bg, fenceOf(l3, "worker-1", gen(1)), retryable(), t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}

	c := s.Counters()
	// Two submits, a connect, three leases, three results.
	if got := c.Operations - base.Operations; got != 9 {
		t.Fatalf("operations %d", got)
	}
	if c.CommitSeconds.Count() != uint64(c.Commits) || c.BatchOperations.Count() != uint64(c.Commits) || c.BatchOperations.Sum != float64(c.Operations) {
		t.Fatalf("commit histograms %+v %+v for %d commits", c.CommitSeconds, c.BatchOperations, c.Commits)
	}
	w := c.SubmitToLeaseSeconds
	if w.Count() != 2 || w.Sum != 3 {
		t.Fatalf("waits %+v", w)
	}
	// 1.5 s is in the (1, 5] bucket: index 7 of the bounds.
	if w.Bounds[7] != 5 || w.Counts[7] != 2 {
		t.Fatalf("wait buckets %+v", w)
	}
	for _, want := range []struct {
		typ, code string
		attempt   bool
		n         int64
	}{
		{EventSubmitted, "", false, 2},
		{EventLeased, "", true, 3},
		{EventAttemptFailed, "execution_failed", true, 2},
		{EventRetryScheduled, "", true, 1},
		{EventFailed, CodeMaxAttemptsExceeded, true, 1},
		{EventSucceeded, "", true, 1},
	} {
		if got := eventCount(c, want.typ, want.code, want.attempt); got != want.n {
			t.Errorf("%s %q: %d, want %d", want.typ, want.code, got, want.n)
		}
	}
	if len(c.Events) != 6 {
		t.Fatalf("events %+v", c.Events)
	}
}

// TestGauges: the live counts of one snapshot, per pool and overall.
func TestGauges(t *testing.T) {
	s := mustOpen(t, ":memory:")
	g, err := s.Gauges(bg)
	if err != nil || len(g.Queues) != 0 || g.RetryWait != 0 || g.Leased != 0 || len(g.Deliveries) != 0 {
		t.Fatalf("empty store: %+v %v", g, err)
	}
	deliveringJob(t, s, "c1") // a delivery in push, on worker-1
	other := textJob("o1", 1)
	other.Pool = "other"
	mustSubmit(t, s, other, t0.Add(3*time.Second))
	mustSubmit(t, s, textJob("j1", 2), t0.Add(5*time.Second))
	mustSubmit(t, s, textJob("j2", 2), t0.Add(6*time.Second))
	mustSubmit(t, s, textJob("j3", 2), t0.Add(7*time.Second))
	l := mustLease(t, s, "worker-1", gen(1), t0.Add(8*time.Second)) // j1
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), retryable(), t0.Add(9*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustConnect(t, s, "worker-2", gen(2), t0)
	if _, err := s.Lease(bg, "worker-2", gen(2), "coding", []string{"reference"}, nil, t0.Add(9500*time.Millisecond)); err != nil {
		t.Fatal(err) // j2 leased (j1 retries at 10 s)
	}
	g, err = s.Gauges(bg)
	if err != nil {
		t.Fatal(err)
	}
	want := Gauges{
		Queues: []Queue{
			{Pool: "coding", Jobs: 2, Oldest: t0.Add(5 * time.Second)}, // j1 (retry_wait) and j3
			{Pool: "other", Jobs: 1, Oldest: t0.Add(3 * time.Second)},
		},
		RetryWait: 1, Leased: 1, Deliveries: map[string]int{DeliveryPush: 1},
	}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("gauges %+v\nwant %+v", g, want)
	}
}

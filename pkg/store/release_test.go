package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestReleaseReturnsUnstartedLeaseWithoutAnAttempt(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 2), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	if _, err := s.Release(bg, Fence{JobID: l.JobID, AttemptID: l.AttemptID, Lane: "worker-1", Generation: gen(2)}, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("release by another generation: %v", err)
	}
	r, err := s.Release(bg, f, t0.Add(time.Millisecond))
	if err != nil || r.Pool != "coding" || r.PluginID != "reference" || r.RepositoryID != "" {
		t.Fatalf("release: %+v %v", r, err)
	}
	a, err := s.Aggregate(bg, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Job.Status != JobPending || a.Job.AttemptCount != 0 || len(a.Attempts) != 0 {
		t.Fatalf("after release: %+v", a)
	}
	if got := eventTypes(t, s, "j1"); !slices.Equal(got, []string{EventSubmitted, EventLeased, EventReleased}) {
		t.Fatalf("events %v", got)
	}
	if _, err := s.Release(bg, f, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second release: %v", err)
	}
	if _, err := s.Complete(bg, f, textOK("late"), t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("result for a released lease: %v", err)
	}

	// The next lease is attempt 1 again; after a retryable failure, a
	// released second lease leaves the retry due at once.
	l = mustLease(t, s, "worker-1", gen(1), t0.Add(2*time.Millisecond))
	if l.Ordinal != 1 {
		t.Fatalf("ordinal after release %d", l.Ordinal)
	}
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), retryable(), t0.Add(3*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	l = mustLease(t, s, "worker-1", gen(1), later)
	if _, err := s.Release(bg, fenceOf(l, "worker-1", gen(1)), later); err != nil {
		t.Fatal(err)
	}
	if j, err := s.Job(bg, "j1"); err != nil || j.Status != JobRetryWait || j.AttemptCount != 1 {
		t.Fatalf("after releasing a retry: %+v %v", j, err)
	}
	if l = mustLease(t, s, "worker-1", gen(1), later); l.Ordinal != 2 {
		t.Fatalf("retry ordinal after release %d", l.Ordinal)
	}

	// A finished or expired attempt cannot be released.
	f = fenceOf(l, "worker-1", gen(1))
	if _, err := s.Complete(bg, f, textOK("done"), later); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(bg, f, later); !errors.Is(err, ErrStale) {
		t.Fatalf("release after result: %v", err)
	}
	mustSubmit(t, s, textJob("j2", 2), later)
	l = mustLease(t, s, "worker-1", gen(1), later)
	if _, err := s.Sweep(bg, later.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(bg, fenceOf(l, "worker-1", gen(1)), later.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Fatalf("release after expiry: %v", err)
	}
}

// A lease the Worker has heartbeated was started: Release refuses it and
// the attempt keeps its lease, its result still recorded.
func TestReleaseRefusesHeartbeatedLease(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 2), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	// Same instant as the lease: the deadline does not move, the start is
	// still recorded.
	if _, err := s.Heartbeat(bg, f, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(bg, f, t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("release of a heartbeated lease: %v", err)
	}
	if j, err := s.Job(bg, "j1"); err != nil || j.Status != JobLeased || j.AttemptCount != 1 {
		t.Fatalf("after refused release: %+v %v", j, err)
	}
	if _, err := s.Complete(bg, f, textOK("done"), t0); err != nil {
		t.Fatalf("result after refused release: %v", err)
	}
}

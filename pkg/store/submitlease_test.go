package store

import (
	"errors"
	"testing"
	"time"
)

// SubmitAndLease persists the job and, in the same commit, leases the
// oldest eligible job to the named idle lane.
func TestSubmitAndLease(t *testing.T) {
	s, _ := openFile(t)
	mustConnect(t, s, "worker-1", gen(1), t0)
	req := LeaseRequest{Lane: "worker-1", Generation: gen(1), Pool: "coding", Plugins: []string{"reference"}}

	before := s.Stats()
	job, l, leaseErr, err := s.SubmitAndLease(bg, textJob("j1", 2), req, t0)
	if err != nil || leaseErr != nil || l == nil || l.JobID != "j1" || l.Ordinal != 1 || job.ID != "j1" {
		t.Fatalf("submit and lease: %+v %+v %v %v", job, l, leaseErr, err)
	}
	if after := s.Stats(); after.Commits-before.Commits != 1 || after.Operations-before.Operations != 1 {
		t.Fatalf("took %d commits, %d operations", after.Commits-before.Commits, after.Operations-before.Operations)
	}
	if j := mustJob(t, s, "j1"); j.Status != JobLeased || j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
	evs, err := s.Events(bg, "j1")
	if err != nil || len(evs) != 2 || evs[0].Type != EventSubmitted || evs[1].Type != EventLeased || evs[1].Seq != 2 {
		t.Fatalf("events %+v %v", evs, err)
	}
	// The lease is an ordinary fenced attempt.
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(2)), textOK("x"), t0); !errors.Is(err, ErrStale) {
		t.Fatalf("other generation completed: %v", err)
	}
	if c, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK("x"), t0.Add(time.Second)); err != nil || c.JobStatus != JobSucceeded {
		t.Fatalf("complete: %+v %v", c, err)
	}

	// Nothing eligible for the lane (another plugin): the job waits.
	other := req
	other.Plugins = []string{"codex"}
	if _, l, leaseErr, err := s.SubmitAndLease(bg, textJob("j2", 2), other, t0); err != nil || leaseErr != nil || l != nil {
		t.Fatalf("ineligible: %+v %v %v", l, leaseErr, err)
	}
	if j := mustJob(t, s, "j2"); j.Status != JobPending {
		t.Fatalf("j2 %+v", j)
	}
	// The oldest eligible job goes first.
	if _, l, _, err := s.SubmitAndLease(bg, textJob("j3", 2), req, t0.Add(time.Second)); err != nil || l == nil || l.JobID != "j2" {
		t.Fatalf("oldest first: %+v %v", l, err)
	}
	// A busy lane keeps its attempt; the job is still persisted.
	if _, l, leaseErr, err := s.SubmitAndLease(bg, textJob("j4", 2), req, t0.Add(time.Second)); err != nil || !errors.Is(leaseErr, ErrLaneBusy) || l != nil {
		t.Fatalf("busy lane: %+v %v %v", l, leaseErr, err)
	}
	// A generation that is not live leases nothing; the job is persisted.
	stale := req
	stale.Generation = gen(9)
	if _, l, leaseErr, err := s.SubmitAndLease(bg, textJob("j5", 2), stale, t0.Add(time.Second)); err != nil || !errors.Is(leaseErr, ErrStale) || l != nil {
		t.Fatalf("stale lane: %+v %v %v", l, leaseErr, err)
	}
	for _, id := range []string{"j3", "j4", "j5"} {
		if j := mustJob(t, s, id); j.Status != JobPending {
			t.Fatalf("%s %+v", id, j)
		}
	}
	// Refused submits write nothing and lease nothing.
	mustConnect(t, s, "worker-1#1", gen(3), t0)
	idle := LeaseRequest{Lane: "worker-1#1", Generation: gen(3), Pool: "coding", Plugins: []string{"reference"}}
	if _, _, _, err := s.SubmitAndLease(bg, textJob("j1", 2), idle, t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	bad := idle
	bad.Pool = "no pool!"
	if _, _, _, err := s.SubmitAndLease(bg, textJob("j6", 2), bad, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed request: %v", err)
	}
	if _, err := s.Job(bg, "j6"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("malformed request stored the job: %v", err)
	}
	if l, err := s.Lease(bg, "worker-1#1", gen(3), "coding", []string{"reference"}, nil, t0.Add(time.Second)); err != nil || l == nil || l.JobID != "j3" {
		t.Fatalf("refused submits leased something: %+v %v", l, err)
	}
}

// CompleteAndLease leases without re-reading the lane only after it
// recorded the result: a replay checks the lane like Lease (here it is
// busy with the attempt the first call leased, so it leases nothing), and a
// fenced generation records and leases nothing.
func TestCompleteAndLeaseChecksLaneOnReplay(t *testing.T) {
	s, _ := openFile(t)
	for _, id := range []string{"j1", "j2", "j3"} {
		mustSubmit(t, s, textJob(id, 2), t0)
	}
	mustConnect(t, s, "worker-1", gen(1), t0)
	req := LeaseRequest{Lane: "worker-1", Generation: gen(1), Pool: "coding", Plugins: []string{"reference"}}
	l1 := mustLease(t, s, "worker-1", gen(1), t0)
	_, l2, err := s.CompleteAndLease(bg, fenceOf(l1, "worker-1", gen(1)), textOK("one"), req, t0)
	if err != nil || l2 == nil || l2.JobID != "j2" {
		t.Fatalf("first: %+v %v", l2, err)
	}
	// The replay is answered (identical: acknowledged) and leases nothing:
	// a request is never refused ErrLaneBusy, which only Lease and
	// SubmitAndLease's leaseErr report.
	if c, l, err := s.CompleteAndLease(bg, fenceOf(l1, "worker-1", gen(1)), textOK("one"), req, t0); err != nil || l != nil || !c.Replayed {
		t.Fatalf("replay while busy: %+v %+v %v", c, l, err)
	}
	if j := mustJob(t, s, "j3"); j.Status != JobPending {
		t.Fatalf("replay leased j3: %+v", j)
	}
	// A takeover fences the old generation: its result records nothing.
	mustConnect(t, s, "worker-1", gen(2), t0)
	if _, l, err := s.CompleteAndLease(bg, fenceOf(l2, "worker-1", gen(1)), textOK("two"), req, t0); !errors.Is(err, ErrStale) || l != nil {
		t.Fatalf("fenced generation: %+v %v", l, err)
	}
	if j := mustJob(t, s, "j2"); j.Status != JobLeased {
		t.Fatalf("fenced result recorded: %+v", j)
	}
	if j := mustJob(t, s, "j3"); j.Status != JobPending {
		t.Fatalf("fenced result leased j3: %+v", j)
	}
}

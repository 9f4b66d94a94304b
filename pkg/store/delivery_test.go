package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const deliverSHA = "0123456789abcdef0123456789abcdef01234567"

// deliveringJob submits a coding job with a delivery target, leases it and
// records a candidate: the job is delivering.
func deliveringJob(t *testing.T, s *Store, id string) Delivery {
	t.Helper()
	mustSubmit(t, s, NewJob{ID: id, Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		Policy:   testPolicy(time.Minute, time.Second, 1, "reference"),
		Delivery: &DeliveryTarget{Owner: "octo", Repo: "project", BaseBranch: "main"}}, t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	addCandidate(t, s, fenceOf(l, "worker-1", gen(1)), deliverSHA, t0)
	c, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), Outcome{Succeeded: true, CandidateSHA: deliverSHA}, t0.Add(time.Second))
	if err != nil || c.JobStatus != JobDelivering {
		t.Fatalf("complete: %+v %v", c, err)
	}
	d, err := s.Delivery(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCodingSuccessStartsDelivery(t *testing.T) {
	s := mustOpen(t, ":memory:")
	d := deliveringJob(t, s, "c1")
	want := Delivery{JobID: "c1", Target: DeliveryTarget{Owner: "octo", Repo: "project", BaseBranch: "main"},
		CandidateSHA: deliverSHA, Branch: "forge/job-c1", Phase: DeliveryPush,
		NextAt: t0.Add(time.Second), StartedAt: t0.Add(time.Second)}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("delivery %+v\nwant %+v", d, want)
	}
	j := mustJob(t, s, "c1")
	if j.Status != JobDelivering || j.CandidateSHA != deliverSHA || j.Delivery == nil ||
		*j.Delivery != (DeliveryView{Phase: "push", Branch: "forge/job-c1"}) {
		t.Fatalf("job %+v delivery %+v", j, j.Delivery)
	}
	wantTypes(t, s, "c1", EventSubmitted, EventLeased, EventDelivering)
	active, err := s.ActiveDeliveries(bg)
	if err != nil || len(active) != 1 || !reflect.DeepEqual(active[0], want) {
		t.Fatalf("active %+v %v", active, err)
	}

	// Without a target the candidate is the result and the job succeeds.
	mustSubmit(t, s, NewJob{ID: "c2", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		Policy: testPolicy(time.Minute, time.Second, 1, "reference")}, t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	addCandidate(t, s, fenceOf(l, "worker-1", gen(1)), deliverSHA, t0)
	c, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), Outcome{Succeeded: true, CandidateSHA: deliverSHA}, t0)
	if err != nil || c.JobStatus != JobSucceeded || mustJob(t, s, "c2").Delivery != nil {
		t.Fatalf("candidate-only: %+v %v", c, err)
	}
	if _, err := s.Delivery(bg, "c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("candidate-only delivery: %v", err)
	}
}

func TestSaveDeliveryTransitions(t *testing.T) {
	s := mustOpen(t, ":memory:")
	d := deliveringJob(t, s, "c1")
	at := t0.Add(time.Minute)
	pr := d
	pr.Phase = DeliveryPullRequest
	if err := s.SaveDelivery(bg, d, pr, at); err != nil {
		t.Fatal(err)
	}
	// A second writer from the old phase is stale.
	if err := s.SaveDelivery(bg, d, pr, at); !errors.Is(err, ErrStale) {
		t.Fatalf("stale save: %v", err)
	}
	ci := pr
	ci.Phase, ci.PRNumber, ci.PRURL, ci.CIState, ci.CIStartedAt = DeliveryCI, 3, "https://github.com/octo/project/pull/3", "waiting", at
	if err := s.SaveDelivery(bg, pr, ci, at); err != nil {
		t.Fatal(err)
	}
	poll := ci
	poll.CIState, poll.ETag, poll.NextAt = "pending", `W/"abc"`, at.Add(time.Minute)
	if err := s.SaveDelivery(bg, ci, poll, at); err != nil {
		t.Fatal(err)
	}
	got, err := s.Delivery(bg, "c1")
	if err != nil || !reflect.DeepEqual(got, poll) {
		t.Fatalf("stored %+v\nwant %+v (%v)", got, poll, err)
	}
	merged := poll
	merged.Phase, merged.MergeSHA, merged.CIState = DeliveryMerged, "89abcdef0123456789abcdef0123456789abcdef", "success"
	if err := s.SaveDelivery(bg, poll, merged, at); err != nil {
		t.Fatal(err)
	}
	j := mustJob(t, s, "c1")
	if j.Status != JobSucceeded || *j.Delivery != (DeliveryView{Phase: "merged", Branch: "forge/job-c1",
		PRURL: "https://github.com/octo/project/pull/3", CIState: "success", MergeSHA: merged.MergeSHA}) {
		t.Fatalf("merged job %+v %+v", j, j.Delivery)
	}
	wantTypes(t, s, "c1", EventSubmitted, EventLeased, EventDelivering, EventDelivery, EventDelivery, EventSucceeded)
	evs, _ := s.Events(bg, "c1")
	if evs[3].Code != "pull_request" || evs[4].Code != "ci" {
		t.Fatalf("phase events %+v", evs[3:5])
	}
	if active, _ := s.ActiveDeliveries(bg); len(active) != 0 {
		t.Fatalf("merged delivery still active: %+v", active)
	}
	if err := s.SaveDelivery(bg, merged, merged, at); !errors.Is(err, ErrInvalid) {
		t.Fatalf("save after terminal: %v", err)
	}
}

func TestSaveDeliveryFailure(t *testing.T) {
	s := mustOpen(t, ":memory:")
	d := deliveringJob(t, s, "c1")
	f := d
	f.Phase, f.FailureCode = DeliveryFailed, "push_rejected"
	if err := s.SaveDelivery(bg, d, f, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	j := mustJob(t, s, "c1")
	if j.Status != JobFailed || j.FailureCode != "push_rejected" || j.Delivery.FailureCode != "push_rejected" {
		t.Fatalf("%+v %+v", j, j.Delivery)
	}
	evs, _ := s.Events(bg, "c1")
	if last := evs[len(evs)-1]; last.Type != EventFailed || last.Code != "push_rejected" {
		t.Fatalf("last event %+v", last)
	}
}

func TestSaveDeliveryRejectsBadValues(t *testing.T) {
	s := mustOpen(t, ":memory:")
	d := deliveringJob(t, s, "c1")
	for name, mut := range map[string]func(*Delivery){
		"phase":           func(x *Delivery) { x.Phase = "shipping" },
		"failed no code":  func(x *Delivery) { x.Phase = DeliveryFailed },
		"code not failed": func(x *Delivery) { x.FailureCode = "ci_failed" },
		"bad code":        func(x *Delivery) { x.Phase, x.FailureCode = DeliveryFailed, "CI Failed: token ghs_x" },
		"merged no sha":   func(x *Delivery) { x.Phase = DeliveryMerged },
		"url creds":       func(x *Delivery) { x.PRURL = "https://x-access-token:ghs@github.com/pull/1" },
		"url http":        func(x *Delivery) { x.PRURL = "http://github.com/o/r/pull/1" },
		"url control":     func(x *Delivery) { x.PRURL = "https://github.com/\n" },
		"long etag":       func(x *Delivery) { x.ETag = strings.Repeat("e", 300) },
		"other sha":       func(x *Delivery) { x.CandidateSHA = strings.Repeat("f", 40) },
		"other branch":    func(x *Delivery) { x.Branch = "main" },
		"ci state":        func(x *Delivery) { x.CIState = "Pending!" },
	} {
		n := d
		mut(&n)
		if err := s.SaveDelivery(bg, d, n, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got, _ := s.Delivery(bg, "c1"); !reflect.DeepEqual(got, d) {
		t.Fatalf("a refused save changed the delivery: %+v", got)
	}
	if _, err := s.Submit(bg, NewJob{ID: "t1", Kind: KindText, Task: []byte(`{}`), Pool: "coding",
		Policy: testPolicy(time.Minute, time.Second, 1, "reference"), Delivery: &DeliveryTarget{Owner: "o", Repo: "r", BaseBranch: "main"}}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("text job with a delivery: %v", err)
	}
	if _, err := s.Submit(bg, NewJob{ID: "c9", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		Policy: testPolicy(time.Minute, time.Second, 1, "reference"), Delivery: &DeliveryTarget{Owner: "o/x", Repo: "r", BaseBranch: "main"}}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad target: %v", err)
	}
}

func TestDeliverySurvivesReopen(t *testing.T) {
	s, path := openFile(t)
	d := deliveringJob(t, s, "c1")
	s.Close()
	s = mustOpen(t, path)
	active, err := s.ActiveDeliveries(bg)
	if err != nil || len(active) != 1 || !reflect.DeepEqual(active[0], d) {
		t.Fatalf("after reopen %+v %v", active, err)
	}
}

// addCandidate binds the evidence batch that records sha as the attempt's
// created candidate, which a successful Complete must name.
func addCandidate(t *testing.T, s *Store, f Fence, sha string, now time.Time) {
	t.Helper()
	if _, err := s.AddEvidence(bg, f, 1, []json.RawMessage{json.RawMessage(`{"phase":"candidate_commit"}`)}, sha, now); err != nil {
		t.Fatal(err)
	}
}

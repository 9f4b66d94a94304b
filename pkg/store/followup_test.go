package store

import (
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// undoFollowups takes a database back from version 4 to version 3's
// shape: no follow-up tables, deliveries without push_over and with the
// old phase check.
var undoFollowups = func() []string {
	first := migrations()[0]
	start := strings.Index(first, "CREATE TABLE deliveries (")
	end := start + strings.Index(first[start:], ");") + 2
	old := strings.Replace(first[start:end], "CREATE TABLE deliveries (", "CREATE TABLE deliveries_3 (", 1)
	return []string{"DROP TABLE followups", "DROP TABLE intake_refusals", old,
		`INSERT INTO deliveries_3 SELECT job_seq, candidate_sha, branch, phase, phase_attempts, next_at, started_at,
  ci_started_at, pr_number, pr_url, ci_state, etag, merge_sha, failure_code, updated_at FROM deliveries`,
		"DROP TABLE deliveries", "ALTER TABLE deliveries_3 RENAME TO deliveries",
		"CREATE INDEX deliveries_active ON deliveries (job_seq) WHERE phase <> 'merged' AND phase <> 'failed'"}
}()

const followSHA = "fedcba9876543210fedcba9876543210fedcba98"

// deliveredPR starts intake job id with a label trigger by actor, runs it
// to its delivery and moves that to phase with pull request 3.
func deliveredPR(t *testing.T, s *Store, id, actor, phase string) Delivery {
	t.Helper()
	tr := labelTrigger(int64(len(id)) + 9000)
	tr.Actor = actor
	j := intakeJob(id)
	j.BaseSHA = ""
	if _, _, err := s.SubmitTrigger(bg, j, tr, t0); err != nil {
		t.Fatal(err)
	}
	d := complete(t, s, id, deliverSHA)
	next := d
	next.Phase, next.PRNumber, next.PRURL = phase, 3, "https://github.com/octo/project/pull/3"
	if err := s.SaveDelivery(bg, d, next, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return next
}

// complete leases job id's attempt and succeeds it with candidate sha.
func complete(t *testing.T, s *Store, id, sha string) Delivery {
	t.Helper()
	mustConnect(t, s, "worker-1", gen(1), t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || l == nil || l.JobID != id {
		t.Fatalf("lease %+v %v", l, err)
	}
	addCandidate(t, s, fenceOf(l, "worker-1", gen(1)), sha, t0)
	if c, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), Outcome{Succeeded: true, CandidateSHA: sha}, t0.Add(time.Second)); err != nil ||
		c.JobStatus != JobDelivering {
		t.Fatalf("complete %+v %v", c, err)
	}
	d, err := s.Delivery(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func followJob(id, base string) NewJob {
	j := intakeJob(id)
	j.BaseSHA = base
	return j
}

func reviewTrigger(event int64, actor string) Trigger {
	return Trigger{RepositoryID: "repo", Kind: TriggerReviewComment, EventID: event, Number: 3, Actor: actor}
}

var openHead = Followup{Open: true, HeadSHA: deliverSHA, MaxFollowups: 5}

func TestFollowupSupersedesAndPushesToTheSameBranch(t *testing.T) {
	s, path := openFile(t)
	deliveredPR(t, s, "orig", "alice", DeliveryReview)
	res, err := s.SubmitFollowup(bg, followJob("f1", deliverSHA), reviewTrigger(501, "bob"), openHead, t0.Add(time.Hour))
	if err != nil || res.Refusal != "" || res.Taken || res.Job.ID != "f1" || res.Superseded != "orig" || res.Ordinal != 1 {
		t.Fatalf("follow-up: %+v %v", res, err)
	}
	// The waiting delivery ended: its job failed superseded, with its event.
	if j := mustJob(t, s, "orig"); j.Status != JobFailed || j.FailureCode != CodeSuperseded ||
		j.Delivery == nil || j.Delivery.Phase != DeliveryFailed || j.Delivery.FailureCode != CodeSuperseded {
		t.Fatalf("superseded job %+v %+v", j, j.Delivery)
	}
	wantTypes(t, s, "orig", EventSubmitted, EventLeased, EventDelivering, EventDelivery, EventFailed)
	// The same trigger again (a re-poll, a restart): the same job, nothing written.
	s.Close()
	s = mustOpen(t, path)
	again, err := s.SubmitFollowup(bg, followJob("f1b", deliverSHA), reviewTrigger(501, "bob"), openHead, t0.Add(2*time.Hour))
	if err != nil || !again.Taken || again.Job.ID != "f1" || again.Refusal != "" {
		t.Fatalf("again: %+v %v", again, err)
	}
	if n := countRows(t, s, "jobs"); n != 2 {
		t.Fatalf("%d jobs", n)
	}
	// Its candidate goes to the pull request's branch, over its base.
	d := complete(t, s, "f1", followSHA)
	want := Delivery{JobID: "f1", Target: DeliveryTarget{Owner: "octo", Repo: "project", BaseBranch: "main"},
		CandidateSHA: followSHA, Branch: "forge/job-orig", PushOver: deliverSHA, Phase: DeliveryPush,
		NextAt: t0.Add(time.Second), StartedAt: t0.Add(time.Second), Requesters: []string{"alice", "bob"}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("delivery %+v\nwant %+v", d, want)
	}
	// The original job's own delivery names its requesters too.
	if o, err := s.Delivery(bg, "orig"); err != nil || !reflect.DeepEqual(o.Requesters, []string{"alice", "bob"}) {
		t.Fatalf("orig requesters %v %v", o.Requesters, err)
	}
	// A delivery of its own branch has no push_over.
	if o, _ := s.Delivery(bg, "orig"); o.PushOver != "" || o.Branch != "forge/job-orig" {
		t.Fatalf("orig %+v", o)
	}
}

func TestFollowupRefusals(t *testing.T) {
	s := mustOpen(t, ":memory:")
	refused := func(event int64, f Followup, want string) {
		t.Helper()
		res, err := s.SubmitFollowup(bg, followJob("x"+string(rune('a'+event%26)), f.HeadSHA), reviewTrigger(event, "bob"), f, t0)
		if err != nil || res.Refusal != want || res.Taken || res.Job.ID != "" {
			t.Fatalf("event %d: %+v %v, want %s", event, res, err, want)
		}
		// Stored once: the same trigger answers the same without writing.
		again, err := s.SubmitFollowup(bg, followJob("y", f.HeadSHA), reviewTrigger(event, "bob"), f, t0)
		if err != nil || again.Refusal != want || !again.Taken {
			t.Fatalf("event %d again: %+v %v", event, again, err)
		}
	}
	// No delivery reached pull request 3 yet.
	refused(1, openHead, RefusedNotDelivered)
	d := deliveredPR(t, s, "orig", "alice", DeliveryMerge)
	refused(2, openHead, RefusedBusy) // merging
	ci := d
	ci.Phase = DeliveryCI
	if err := s.SaveDelivery(bg, d, ci, t0); err != nil {
		t.Fatal(err)
	}
	closed := openHead
	closed.Open = false
	refused(3, closed, RefusedClosed)
	moved := openHead
	moved.HeadSHA = followSHA
	refused(4, moved, RefusedBaseMoved)
	none := openHead
	none.MaxFollowups = 0
	refused(5, none, RefusedLimit)
	// Accepted, then busy while it codes; the limit counts follow-ups.
	one := openHead
	one.MaxFollowups = 1
	if res, err := s.SubmitFollowup(bg, followJob("f1", deliverSHA), reviewTrigger(6, "bob"), one, t0); err != nil || res.Job.ID != "f1" {
		t.Fatalf("first follow-up: %+v %v", res, err)
	}
	refused(7, one, RefusedBusy)
	fd := complete(t, s, "f1", followSHA)
	ci = fd
	ci.Phase, ci.PRNumber = DeliveryCI, 3
	if err := s.SaveDelivery(bg, fd, ci, t0); err != nil {
		t.Fatal(err)
	}
	atFollow := one
	atFollow.HeadSHA = followSHA
	refused(8, atFollow, RefusedLimit)
	// A merged pull request takes none.
	merged := ci
	merged.Phase, merged.MergeSHA = DeliveryMerged, followSHA
	if err := s.SaveDelivery(bg, ci, merged, t0); err != nil {
		t.Fatal(err)
	}
	atFollow.MaxFollowups = 5
	refused(9, atFollow, RefusedClosed)
	if n := countRows(t, s, "intake_refusals"); n != 8 {
		t.Fatalf("%d refusals stored", n)
	}
	if n := countRows(t, s, "followups"); n != 1 {
		t.Fatalf("%d follow-ups", n)
	}

	// Malformed input writes nothing.
	for name, c := range map[string]struct {
		j  NewJob
		tr Trigger
		f  Followup
	}{
		"label":      {followJob("m", deliverSHA), labelTrigger(50), openHead},
		"base":       {followJob("m", followSHA), reviewTrigger(51, "bob"), openHead},
		"no target":  {NewJob{ID: "m", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo", BaseSHA: deliverSHA}, reviewTrigger(52, "bob"), openHead},
		"negative":   {followJob("m", deliverSHA), reviewTrigger(53, "bob"), Followup{Open: true, HeadSHA: deliverSHA, MaxFollowups: -1}},
		"bad actor":  {followJob("m", deliverSHA), reviewTrigger(54, "b b"), openHead},
		"bad number": {followJob("m", deliverSHA), Trigger{RepositoryID: "repo", Kind: TriggerComment, EventID: 55, Actor: "bob"}, openHead},
	} {
		if _, err := s.SubmitFollowup(bg, c.j, c.tr, c.f, t0); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := countRows(t, s, "intake_refusals"); n != 8 {
		t.Fatalf("%d refusals after malformed input", n)
	}
}

// TestFollowupLimitFiveThenRefusal: six follow-up commands, each after
// the previous one's delivery reached CI: five jobs, then the refusal.
func TestFollowupLimitFiveThenRefusal(t *testing.T) {
	s := mustOpen(t, ":memory:")
	deliveredPR(t, s, "orig", "alice", DeliveryCI)
	head := deliverSHA
	for i := 1; i <= 6; i++ {
		f := openHead
		f.HeadSHA = head
		id := "f" + string(rune('0'+i))
		res, err := s.SubmitFollowup(bg, followJob(id, head), reviewTrigger(int64(700+i), "bob"), f, t0)
		if err != nil {
			t.Fatal(err)
		}
		if i == 6 {
			if res.Refusal != RefusedLimit || res.Job.ID != "" {
				t.Fatalf("sixth: %+v", res)
			}
			break
		}
		if res.Job.ID != id || res.Ordinal != i {
			t.Fatalf("follow-up %d: %+v", i, res)
		}
		head = strings.Repeat(string(rune('0'+i)), 40)
		d := complete(t, s, id, head)
		ci := d
		ci.Phase, ci.PRNumber = DeliveryCI, 3
		if err := s.SaveDelivery(bg, d, ci, t0); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, s, "followups"); n != 5 {
		t.Fatalf("%d follow-ups", n)
	}
}

// TestFollowupMigration: a version 3 database keeps its deliveries and
// takes follow-ups once migrated.
func TestFollowupMigration(t *testing.T) {
	s, path := openFile(t)
	deliveredPR(t, s, "orig", "alice", DeliveryCI)
	s.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range undoIntakeState(append(undoFollowups, "UPDATE schema_version SET version = 3")...) {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	s = mustOpen(t, path)
	d, err := s.Delivery(bg, "orig")
	if err != nil || d.Phase != DeliveryCI || d.PRNumber != 3 || d.Branch != "forge/job-orig" || d.PushOver != "" {
		t.Fatalf("delivery after migration %+v %v", d, err)
	}
	if res, err := s.SubmitFollowup(bg, followJob("f1", deliverSHA), reviewTrigger(1, "bob"), openHead, t0); err != nil || res.Job.ID != "f1" {
		t.Fatalf("follow-up after migration: %+v %v", res, err)
	}
	review := d
	review.Phase = DeliveryReview
	if err := s.SaveDelivery(bg, d, review, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("superseded delivery saved: %v", err)
	}
}

func TestCancelIntake(t *testing.T) {
	s := mustOpen(t, ":memory:")
	// Issue 7: one job waiting in the queue, one running (leased).
	if _, _, err := s.SubmitTrigger(bg, intakeJob("queued"), labelTrigger(1), t0); err != nil {
		t.Fatal(err)
	}
	mustConnect(t, s, "worker-1", gen(1), t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || l == nil || l.JobID != "queued" {
		t.Fatalf("lease %+v %v", l, err)
	}
	if _, _, err := s.SubmitTrigger(bg, intakeJob("waiting"), labelTrigger(2), t0); err != nil {
		t.Fatal(err)
	}
	other := labelTrigger(3)
	other.Number = 8
	if _, _, err := s.SubmitTrigger(bg, intakeJob("other"), other, t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.CancelIntake(bg, "repo", 7, t0.Add(time.Minute))
	if err != nil || !reflect.DeepEqual(got.Jobs, []string{"queued", "waiting"}) || len(got.Attempts) != 1 ||
		got.Attempts[0].AttemptID != l.AttemptID || got.Attempts[0].Lane != "worker-1" || got.Attempts[0].Generation != gen(1) {
		t.Fatalf("cancel issue 7: %+v %v", got, err)
	}
	for _, id := range []string{"queued", "waiting"} {
		if j := mustJob(t, s, id); j.Status != JobFailed || j.FailureCode != CodeCancelled {
			t.Fatalf("%s: %+v", id, j)
		}
	}
	if j := mustJob(t, s, "other"); j.Status != JobPending {
		t.Fatalf("another issue's job: %+v", j)
	}
	// The cancelled attempt's result is refused: nothing it sends counts.
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), Outcome{Succeeded: true, CandidateSHA: deliverSHA}, t0.Add(2*time.Minute)); err == nil {
		t.Fatal("a cancelled attempt completed")
	}
	// Again: nothing left to cancel.
	if got, err := s.CancelIntake(bg, "repo", 7, t0.Add(time.Hour)); err != nil || len(got.Jobs) != 0 {
		t.Fatalf("second cancel: %+v %v", got, err)
	}
	if _, err := s.CancelIntake(bg, "repo", 0, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("number 0: %v", err)
	}
}

// Closing a pull request cancels its follow-up and a delivery waiting
// for CI; a delivery already merging is left to finish.
func TestCancelIntakePullRequest(t *testing.T) {
	s := mustOpen(t, ":memory:")
	deliveredPR(t, s, "orig", "alice", DeliveryReview)
	if res, err := s.SubmitFollowup(bg, followJob("f1", deliverSHA), reviewTrigger(1, "bob"), openHead, t0); err != nil || res.Job.ID != "f1" {
		t.Fatalf("follow-up %+v %v", res, err)
	}
	got, err := s.CancelIntake(bg, "repo", 3, t0.Add(time.Minute))
	if err != nil || !reflect.DeepEqual(got.Jobs, []string{"f1"}) {
		t.Fatalf("cancel pull request: %+v %v", got, err)
	}
	// A delivery in ci ends cancelled; one merging does not.
	s = mustOpen(t, ":memory:")
	d := deliveredPR(t, s, "orig", "alice", DeliveryCI)
	if got, err := s.CancelIntake(bg, "repo", 3, t0.Add(time.Minute)); err != nil || len(got.Jobs) != 1 {
		t.Fatalf("cancel in ci: %+v %v", got, err)
	}
	if j := mustJob(t, s, "orig"); j.Status != JobFailed || j.Delivery.Phase != DeliveryFailed || j.Delivery.FailureCode != CodeCancelled {
		t.Fatalf("cancelled delivery: %+v %+v", j, j.Delivery)
	}
	next := d
	next.Phase = DeliveryMerge
	if err := s.SaveDelivery(bg, d, next, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("save after cancel: %v", err)
	}
	s = mustOpen(t, ":memory:")
	deliveredPR(t, s, "orig", "alice", DeliveryMerge)
	if got, err := s.CancelIntake(bg, "repo", 3, t0.Add(time.Minute)); err != nil || len(got.Jobs) != 0 || mustJob(t, s, "orig").Status != JobDelivering {
		t.Fatalf("cancel while merging: %+v %v", got, err)
	}
}

// A head whose candidate ref is gone starts nothing: base_gone where a
// job would have started, the store's verdict otherwise, each stored once.
func TestFollowupBaseGone(t *testing.T) {
	s := mustOpen(t, ":memory:")
	deliveredPR(t, s, "orig", "alice", DeliveryCI)
	res, err := s.RefuseFollowupBaseGone(bg, reviewTrigger(1, "bob"), openHead, t0)
	if err != nil || res.Refusal != RefusedBaseGone || res.Job.ID != "" {
		t.Fatalf("base gone: %+v %v", res, err)
	}
	if job, refusal, ok, err := s.TriggerAnswer(bg, "repo", TriggerReviewComment, 1); err != nil || !ok || job != "" || refusal != RefusedBaseGone {
		t.Fatalf("answer: %q %q %v %v", job, refusal, ok, err)
	}
	closed := openHead
	closed.Open = false
	if res, err := s.RefuseFollowupBaseGone(bg, reviewTrigger(2, "bob"), closed, t0); err != nil || res.Refusal != RefusedClosed {
		t.Fatalf("closed: %+v %v", res, err)
	}
	if j := mustJob(t, s, "orig"); j.Status != JobDelivering {
		t.Fatalf("a refusal superseded the delivery: %+v", j)
	}
	if res, err := s.SubmitFollowup(bg, followJob("f1", deliverSHA), reviewTrigger(3, "bob"), openHead, t0); err != nil || res.Job.ID != "f1" {
		t.Fatalf("follow-up: %+v %v", res, err)
	}
	if job, _, ok, err := s.TriggerAnswer(bg, "repo", TriggerReviewComment, 3); err != nil || !ok || job != "f1" {
		t.Fatalf("answer of a job: %q %v %v", job, ok, err)
	}
	if _, _, ok, err := s.TriggerAnswer(bg, "repo", TriggerReviewComment, 4); err != nil || ok {
		t.Fatalf("unknown trigger: %v %v", ok, err)
	}
}

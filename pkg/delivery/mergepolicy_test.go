package delivery

import (
	"reflect"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/intake"
)

var (
	writer = intake.Permission{Permission: "write", RoleName: "write"}
	triage = intake.Permission{Permission: "read", RoleName: "triage"}
)

func approval(login, commit string) Review {
	return Review{Login: login, Type: "User", State: reviewApproved, CommitID: commit}
}

func TestVerdicts(t *testing.T) {
	const old = "3333333333333333333333333333333333333333"
	reviews := []Review{
		approval("carol", old), // voided by the new head
		approval("dave", cand), // then dismissed
		{Login: "dave", Type: "User", State: reviewDismissed, CommitID: cand},
		approval("erin", cand), // a later comment keeps it
		{Login: "erin", Type: "User", State: "COMMENTED", CommitID: cand},
		approval("Alice", cand),       // a requester, in another case
		approval("ci-bot[bot]", cand), // a bot
		{Login: "robot", Type: "Bot", State: reviewApproved, CommitID: cand},
		{Login: "frank", Type: "User", State: reviewChangesRequested, CommitID: old},
		approval("gina", cand), // then requests changes
		{Login: "gina", Type: "User", State: reviewChangesRequested, CommitID: cand},
		{Login: "", Type: "User", State: reviewApproved, CommitID: cand}, // a deleted account
	}
	approving, requesting := Verdicts(reviews, cand, []string{"alice"})
	if !reflect.DeepEqual(approving, []Review{approval("erin", cand)}) {
		t.Fatalf("approving %+v", approving)
	}
	if len(requesting) != 2 || requesting[0].Login != "frank" || requesting[1].Login != "gina" {
		t.Fatalf("requesting %+v", requesting)
	}
}

// toReview runs a review-policy delivery until its review phase.
func toReview(t *testing.T, requesters ...string) (*Machine, *fakeGitHub, *fakeClock, State) {
	t.Helper()
	m, gh, c, s := setup(t)
	s.Review, s.Requesters = true, requesters
	gh.perms = map[string]intake.Permission{}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for i := 0; i < 100 && s.Phase != PhaseReview; i++ {
		if s.Phase.Terminal() || s.Phase == PhaseMerge {
			t.Fatalf("no review phase: %+v", s)
		}
		s = step(t, m, c, s)
	}
	if s.Phase != PhaseReview || s.CIState != CISuccess {
		t.Fatalf("after CI: %+v", s)
	}
	return m, gh, c, s
}

// Under the merge policy review nothing merges on CI alone; approvals by
// the requester, by a triage user, of an older commit or by a bot never
// do; an authorised other person's approval of the head does.
func TestReviewPolicyWaitsForAnAuthorisedOtherApprover(t *testing.T) {
	m, gh, c, s := toReview(t, "alice")
	gh.perms["alice"], gh.perms["tom"], gh.perms["bob"] = writer, triage, writer
	gh.reviews = []Review{approval("alice", cand), approval("tom", cand), approval("bob", "3333333333333333333333333333333333333333"),
		approval("helper[bot]", cand)}
	// Waiting past the delivery's timeout is no timeout: a person decides.
	for i := 0; i < 40; i++ {
		s = step(t, m, c, s)
		if s.Phase != PhaseReview {
			t.Fatalf("left the review phase without an approval: %+v", s)
		}
	}
	if elapsed := c.Now().Sub(s.StartedAt); elapsed <= testConfig().Timeout {
		t.Fatalf("waited only %v", elapsed)
	}
	if gh.mergeReq != 0 || gh.count("reviews-304") < 30 {
		t.Fatalf("%d merge requests, %d unchanged reads", gh.mergeReq, gh.count("reviews-304"))
	}
	// A poll a minute at least.
	if d := s.NextAt.Sub(c.Now()); d != time.Minute {
		t.Fatalf("review poll %v", d)
	}
	gh.reviews = append(gh.reviews, approval("bob", cand))
	s = step(t, m, c, s)
	if s.Phase != PhaseMerge || !s.StartedAt.Equal(c.Now()) {
		t.Fatalf("approved: %+v", s)
	}
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged || gh.merges != 1 {
		t.Fatalf("merge after approval: %+v", s)
	}
}

// An authorised reviewer's request for changes holds the merge despite
// an approval; a triage user's does not.
func TestReviewPolicyChangesRequestedHold(t *testing.T) {
	m, gh, c, s := toReview(t, "alice")
	gh.perms["bob"], gh.perms["carol"] = writer, writer
	gh.reviews = []Review{approval("bob", cand), {Login: "carol", Type: "User", State: reviewChangesRequested, CommitID: cand}}
	s = step(t, m, c, step(t, m, c, s))
	if s.Phase != PhaseReview {
		t.Fatalf("merged over a request for changes: %+v", s)
	}
	gh.perms["carol"] = triage
	gh.reviews = append(gh.reviews, Review{Login: "carol", Type: "User", State: "COMMENTED", CommitID: cand})
	if s = step(t, m, c, s); s.Phase != PhaseMerge {
		t.Fatalf("a triage user's request held it: %+v", s)
	}
}

// A follow-up's new commit voids the approvals of the previous one: its
// delivery waits in review again until the new head is approved.
func TestReviewPolicyNewCommitVoidsApprovals(t *testing.T) {
	m, gh, c, s := toReview(t, "alice")
	gh.perms["bob"] = writer
	// bob approved the first candidate, then asked for a follow-up (he is
	// a requester of the pull request now).
	gh.reviews = []Review{approval("bob", cand)}
	f := followup(s)
	f.Review, f.Requesters = true, []string{"alice", "bob"}
	gh.setRuns(Run{ID: 2, HeadSHA: cand2, Status: "completed", Conclusion: "success"})
	for i := 0; i < 100 && f.Phase != PhaseReview; i++ {
		f = step(t, m, c, f)
	}
	if f.Phase != PhaseReview {
		t.Fatalf("follow-up: %+v", f)
	}
	gh.perms["carol"] = writer
	gh.reviews = append(gh.reviews, approval("carol", cand))
	if f = step(t, m, c, f); f.Phase != PhaseReview {
		t.Fatalf("an approval of the old head merged the new one: %+v", f)
	}
	gh.reviews = append(gh.reviews, approval("bob", cand2))
	if f = step(t, m, c, f); f.Phase != PhaseReview {
		t.Fatalf("a requester's approval merged: %+v", f)
	}
	gh.reviews = append(gh.reviews, approval("carol", cand2))
	if f = runToEnd(t, m, c, f); f.Phase != PhaseMerged || gh.prs[0].HeadSHA != cand2 {
		t.Fatalf("approved follow-up: %+v", f)
	}
}

// Closing the pull request while it waits for a review ends it.
func TestReviewPolicyClosedWhileWaiting(t *testing.T) {
	m, gh, c, s := toReview(t, "alice")
	gh.prs[0].State = "closed"
	if s = step(t, m, c, s); s.Code != CodePRClosed {
		t.Fatalf("closed: %+v", s)
	}
}

// Every delivery failure code has words of its own in an intake status
// comment (what the maintainer does next).
func TestEveryCodeHasIntakeAdvice(t *testing.T) {
	generic := intake.FailureAdvice("no_such_code")
	for c := range codes {
		if intake.FailureAdvice(c) == generic {
			t.Errorf("no advice for %s", c)
		}
	}
}

// A delivery waiting for a review when the Gate restarts with the policy
// auto merges without one.
func TestReviewPhaseUnderAutoMerges(t *testing.T) {
	m, gh, c, s := toReview(t, "alice")
	s.Review = false
	if s = step(t, m, c, s); s.Phase != PhaseMerge || gh.count("reviews") != 0 {
		t.Fatalf("auto in review: %+v", s)
	}
	if s = runToEnd(t, m, c, s); s.Phase != PhaseMerged {
		t.Fatalf("%+v", s)
	}
}

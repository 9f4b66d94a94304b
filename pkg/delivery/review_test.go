package delivery

import (
	"context"
	"testing"
	"time"
)

// A pull request retargeted to another base while CI ran is never merged
// there.
func TestMergeRefusesARetargetedBase(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for s.Phase != PhaseMerge {
		s = step(t, m, c, s)
	}
	gh.prs[0].BaseRef = "release"
	s = runToEnd(t, m, c, s)
	if s.Code != CodeBaseChanged || gh.mergeReq != 0 {
		t.Fatalf("retargeted base: %+v, %d merge requests", s, gh.mergeReq)
	}
}

// No wait (rate limit, back-off, poll pacing) is scheduled past the
// delivery's timeout: the job ends at the timeout, not after the wait.
func TestWaitsEndAtTheTimeout(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	deadline := s.StartedAt.Add(testConfig().Timeout)
	gh.failRuns = func() error { return &Error{Kind: KindRateLimited, RetryAt: c.Now().Add(2 * time.Hour)} }
	s = step(t, m, c, s)
	if s.NextAt.After(deadline) {
		t.Fatalf("rate-limit wait until %v, past the timeout %v", s.NextAt, deadline)
	}
	s = runToEnd(t, m, c, s)
	// No runs answer ever came: the CI phase's own code (not delivery_timed_out).
	if s.Code != CodeCITimedOut || c.Now().After(deadline) {
		t.Fatalf("%s at %v, timeout %v", s.Code, c.Now(), deadline)
	}

	// An exhausted budget whose reset is hours away: pending runs time out.
	m, gh, c, s = setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
	gh.rate = RateLimit{Limit: 60, Remaining: 0, Reset: c.Now().Add(3 * time.Hour)}
	s = step(t, m, c, s)
	if s.NextAt.After(deadline) {
		t.Fatalf("poll at %v, past the timeout %v", s.NextAt, deadline)
	}
	s = runToEnd(t, m, c, s)
	if s.Code != CodeCITimedOut || c.Now().After(deadline) {
		t.Fatalf("%s at %v, timeout %v", s.Code, c.Now(), deadline)
	}
}

// A pull request a person retargeted and merged elsewhere is not a
// delivery to the base branch.
func TestMergedElsewhereIsNotDelivered(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for s.Phase != PhaseMerge {
		s = step(t, m, c, s)
	}
	gh.prs[0].BaseRef, gh.prs[0].Merged, gh.prs[0].State, gh.prs[0].MergeCommitSHA = "release", true, "closed", "m9"
	s = runToEnd(t, m, c, s)
	if s.Code != CodeBaseChanged || s.MergeSHA != "" || gh.mergeReq != 0 {
		t.Fatalf("merged into another base: %+v", s)
	}
}

// A delivery that times out in pull_request after a creation whose answer
// was lost still names the pull request it left open.
func TestTimeoutNamesTheLeftPullRequest(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	gh.loseCreate = true
	s = step(t, m, c, s)
	if s.Phase != PhasePullRequest || len(gh.prs) != 1 {
		t.Fatalf("lost creation: %+v", s)
	}
	c.Advance(time.Hour)
	s = step(t, m, c, s)
	if s.Code != CodeTimedOut || s.PRURL != gh.prs[0].URL || s.PRNumber != 1 || gh.count("create") != 1 {
		t.Fatalf("%+v", s)
	}
}

// The unauthenticated budget is shared by every delivery of the Gate:
// concurrent deliveries in ci stay within it together. With one poll a
// minute for the whole Gate only the oldest delivery polls (its next
// poll a minute on); the younger one waits its admission without a
// request.
func TestConcurrentPollsShareTheBudget(t *testing.T) {
	m, gh, c, a := setup(t)
	b := New("job2", testRepo, "main", cand, c.Now())
	a = step(t, m, c, step(t, m, c, a))
	b = step(t, m, c, step(t, m, c, b))
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
	// 30 requests left for 30 minutes: one a minute for the whole Gate.
	gh.rate = RateLimit{Limit: 60, Remaining: 30, Reset: c.Now().Add(30 * time.Minute)}
	now := c.Now()
	a, _ = m.Step(context.Background(), a)
	b, _ = m.Step(context.Background(), b)
	if a.Phase != PhaseCI || b.Phase != PhaseCI || gh.count("runs") != 1 || a.NextAt.Before(now.Add(time.Minute-time.Second)) {
		t.Fatalf("a polls at %v, b at %v, after %v; %d runs reads, want 1", a.NextAt, b.NextAt, now, gh.count("runs"))
	}
	// Once the older one leaves ci, the younger polls.
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "failure"})
	for !a.Phase.Terminal() {
		a = step(t, m, c, a)
	}
	reads := gh.count("runs")
	for i := 0; i < 3 && !b.Phase.Terminal(); i++ {
		b = step(t, m, c, b) // its turn in the queue, then the poll
	}
	if gh.count("runs") != reads+1 || b.Code != CodeCIFailed {
		t.Fatalf("b after a left ci: %+v", b)
	}
}

// A merged pull request whose answer names no merge commit is not
// recorded as merged without one (the store refuses that state, which
// would leave the job delivering forever): the read is retried and ends
// github_unavailable.
func TestMergedWithoutMergeCommitIsRetried(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	gh.prs = []PullRequest{{Number: 1, URL: "https://github.com/o/r/pull/1", State: "closed", Merged: true, HeadSHA: cand,
		HeadRef: s.Branch, BaseRef: "main"}}
	if s = runToEnd(t, m, c, s); s.Code != CodeUnavailable || s.MergeSHA != "" {
		t.Fatalf("pull_request: %+v", s)
	}

	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for s.Phase != PhaseMerge {
		s = step(t, m, c, s)
	}
	gh.prs[0].Merged, gh.prs[0].State = true, "closed"
	if s = runToEnd(t, m, c, s); s.Code != CodeUnavailable || gh.mergeReq != 0 {
		t.Fatalf("merge: %+v, %d merge requests", s, gh.mergeReq)
	}
}

// An installation token GitHub stops accepting before its expires_at
// (401: revoked, or the installation's permissions changed) is replaced:
// the phase retries with a fresh token instead of failing for good.
func TestRejectedTokenIsReplaced(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	rejected := 0
	gh.failFind = func() error {
		if rejected++; rejected == 1 {
			return &Error{Kind: KindTokenRejected}
		}
		return nil
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	if s = runToEnd(t, m, c, s); s.Phase != PhaseMerged || gh.mints != 2 {
		t.Fatalf("%+v, %d mints", s, gh.mints)
	}
	// Rejected at every try: permission_denied after max_attempts.
	m, gh, c, s = setup(t)
	gh.failPush = func() error { return &Error{Kind: KindTokenRejected} }
	if s = runToEnd(t, m, c, s); s.Code != CodePermissionDenied || gh.mints != testConfig().MaxAttempts {
		t.Fatalf("%+v, %d mints", s, gh.mints)
	}
}

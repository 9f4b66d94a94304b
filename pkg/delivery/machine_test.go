package delivery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const cand = "1111111111111111111111111111111111111111"

var testRepo = Repo{Owner: "o", Name: "r"}

func testConfig() Config {
	return Config{MaxAttempts: 3, RetryBase: 5 * time.Second, PollInterval: 10 * time.Second,
		NoRunsGrace: 2 * time.Minute, Timeout: 30 * time.Minute}
}

func setup(t *testing.T) (*Machine, *fakeGitHub, *fakeClock, State) {
	t.Helper()
	clock := newClock()
	gh := newFake(t, clock)
	m, err := NewMachine(gh, testConfig(), clock)
	if err != nil {
		t.Fatal(err)
	}
	return m, gh, clock, New("job1", testRepo, "main", cand, clock.Now())
}

// step runs one step after waiting until s.NextAt.
func step(t *testing.T, m *Machine, c *fakeClock, s State) State {
	t.Helper()
	if d := s.NextAt.Sub(c.Now()); d > 0 {
		c.Advance(d)
	}
	next, err := m.Step(context.Background(), s)
	if err != nil {
		t.Fatalf("step: %v", err)
	}
	return next
}

// toMerge steps until the merge phase (bounded).
func toMerge(t *testing.T, m *Machine, c *fakeClock, s State) State {
	t.Helper()
	for i := 0; i < 1000 && s.Phase != PhaseMerge; i++ {
		if s.Phase.Terminal() {
			t.Fatalf("ended before the merge: %+v", s)
		}
		s = step(t, m, c, s)
	}
	if s.Phase != PhaseMerge {
		t.Fatalf("no merge phase after 1000 steps: %+v", s)
	}
	return s
}

// runToEnd steps until terminal (bounded).
func runToEnd(t *testing.T, m *Machine, c *fakeClock, s State) State {
	t.Helper()
	for i := 0; i < 1000 && !s.Phase.Terminal(); i++ {
		s = step(t, m, c, s)
	}
	if !s.Phase.Terminal() {
		t.Fatalf("not terminal after 1000 steps: %s", s.Phase)
	}
	return s
}

func TestTransitionsToMerged(t *testing.T) {
	m, gh, c, s := setup(t)
	if s.Branch != "forge/job-job1" || s.Phase != PhasePush {
		t.Fatalf("initial state %+v", s)
	}
	s = step(t, m, c, s)
	if s.Phase != PhasePullRequest || gh.branches["forge/job-job1"] != cand {
		t.Fatalf("after push: %s, branch %q", s.Phase, gh.branches["forge/job-job1"])
	}
	s = step(t, m, c, s)
	if s.Phase != PhaseCI || s.PRNumber != 1 || s.PRURL != "https://github.com/o/r/pull/1" || s.CIState != CIWaiting {
		t.Fatalf("after pull request: %+v", s)
	}
	if !s.CIStartedAt.Equal(c.Now()) {
		t.Fatalf("ci start %v, want %v", s.CIStartedAt, c.Now())
	}
	s = step(t, m, c, s)
	if s.Phase != PhaseCI || s.CIState != CIWaiting || !s.NextAt.Equal(c.Now().Add(10*time.Second)) {
		t.Fatalf("no runs yet: %+v", s)
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"}, Run{ID: 2, HeadSHA: "2222222222222222222222222222222222222222", Status: "completed", Conclusion: "failure"})
	s = step(t, m, c, s)
	if s.CIState != CIPending || s.Phase != PhaseCI {
		t.Fatalf("pending: %+v", s)
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"},
		Run{ID: 3, HeadSHA: cand, Status: "completed", Conclusion: "skipped"})
	s = step(t, m, c, s)
	if s.Phase != PhaseCI || s.CIState != CIPending {
		t.Fatalf("a first passing answer is not yet a verdict: %+v", s)
	}
	s = toMerge(t, m, c, s)
	if s.CIState != CISuccess || c.Now().Before(s.CIStartedAt.Add(testConfig().NoRunsGrace)) {
		t.Fatalf("ci passed: %+v at %v", s, c.Now())
	}
	s = step(t, m, c, s)
	if s.Phase != PhaseMerged || s.MergeSHA != "m1" || s.Code != "" {
		t.Fatalf("merged: %+v", s)
	}
	if gh.merges != 1 || gh.count("push") != 1 || gh.count("create") != 1 || gh.mints != 1 {
		t.Fatalf("merges %d pushes %d creates %d mints %d", gh.merges, gh.count("push"), gh.count("create"), gh.mints)
	}
	if again, _ := m.Step(context.Background(), s); !reflect.DeepEqual(again, s) {
		t.Fatal("a terminal state changed")
	}
}

func TestVerdict(t *testing.T) {
	ok := func(c string) Run { return Run{HeadSHA: cand, Status: "completed", Conclusion: c} }
	cases := []struct {
		name string
		runs Runs
		want string
	}{
		{"none", Runs{}, CIWaiting},
		{"other sha only", Runs{TotalCount: 1, Runs: []Run{{HeadSHA: "x", Status: "completed", Conclusion: "success"}}}, CIWaiting},
		{"queued", Runs{TotalCount: 1, Runs: []Run{{HeadSHA: cand, Status: "queued"}}}, CIPending},
		{"success", Runs{TotalCount: 1, Runs: []Run{ok("success")}}, CISuccess},
		{"neutral and skipped", Runs{TotalCount: 2, Runs: []Run{ok("neutral"), ok("skipped")}}, CISuccess},
		{"not all listed", Runs{TotalCount: 3, Runs: []Run{ok("success")}}, CIPending},
		{"failure beside pending", Runs{TotalCount: 2, Runs: []Run{{HeadSHA: cand, Status: "in_progress"}, ok("failure")}}, CIFailure},
	}
	for _, bad := range []string{"failure", "cancelled", "timed_out", "action_required", "stale", "", "startup_failure"} {
		cases = append(cases, struct {
			name string
			runs Runs
			want string
		}{"conclusion " + bad, Runs{TotalCount: 2, Runs: []Run{ok("success"), ok(bad)}}, CIFailure})
	}
	for _, tc := range cases {
		if got := Verdict(cand, tc.runs); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestCIFailureFailsWithoutMerge(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "failure"})
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseFailed || s.Code != CodeCIFailed || s.CIState != CIFailure {
		t.Fatalf("%+v", s)
	}
	if gh.mergeReq != 0 || gh.prs[0].State != "open" {
		t.Fatalf("merge requests %d, pr state %s", gh.mergeReq, gh.prs[0].State)
	}
}

func TestNoRunsGrace(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	start := s.CIStartedAt
	s = runToEnd(t, m, c, s)
	if s.Code != CodeCINoRuns || s.CIState != CINoRuns {
		t.Fatalf("%+v", s)
	}
	if c.Now().Before(start.Add(2*time.Minute)) || c.Now().After(start.Add(2*time.Minute+10*time.Second)) {
		t.Fatalf("failed at %v after ci start, want the grace (2m) to within one poll", c.Now().Sub(start))
	}
	if gh.mergeReq != 0 || gh.prs[0].State != "open" {
		t.Fatal("no-runs delivery touched the pull request")
	}
}

func TestTimeouts(t *testing.T) {
	// Pending runs until the timeout: ci_timed_out.
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.setRuns(Run{HeadSHA: cand, Status: "in_progress"})
	s = runToEnd(t, m, c, s)
	if s.Code != CodeCITimedOut {
		t.Fatalf("pending forever: %s", s.Code)
	}
	if got := c.Now().Sub(s.StartedAt); got < 30*time.Minute || got > 31*time.Minute {
		t.Fatalf("timed out after %v, want 30m from the delivery start", got)
	}

	// Rate limited from the start in push: delivery_timed_out.
	m, gh, c, s = setup(t)
	gh.failPush = func() error { return &Error{Kind: KindRateLimited} }
	s = runToEnd(t, m, c, s)
	if s.Code != CodeTimedOut {
		t.Fatalf("push: %s", s.Code)
	}

	// Timeout in merge after a merge whose answer was lost: merged.
	m, gh, c, s = setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = toMerge(t, m, c, s)
	gh.loseMerge = true
	s = step(t, m, c, s)
	if s.Phase != PhaseMerge || s.PhaseAttempts != 1 {
		t.Fatalf("lost merge answer: %+v", s)
	}
	c.Advance(time.Hour)
	s = step(t, m, c, s)
	if s.Phase != PhaseMerged || s.MergeSHA != "m1" || gh.mergeReq != 1 {
		t.Fatalf("timeout after a done merge: %+v, merge requests %d", s, gh.mergeReq)
	}

	// At the timeout in merge, a failed check is retried, not reported as
	// a timeout; a merge that did not happen then times out.
	m, gh, c, s = setup(t)
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for s.Phase != PhaseMerge {
		s = step(t, m, c, s)
	}
	c.Advance(time.Hour)
	checks := 0
	gh.failMerged = func() error {
		if checks++; checks == 1 {
			return errors.New("connection reset")
		}
		return nil
	}
	if s = step(t, m, c, s); s.Phase != PhaseMerge || s.PhaseAttempts != 1 {
		t.Fatalf("unchecked timeout: %+v", s)
	}
	if s = step(t, m, c, s); s.Code != CodeTimedOut || gh.mergeReq != 0 {
		t.Fatalf("checked timeout: %+v, %d merge requests", s, gh.mergeReq)
	}
}

func TestLostPullRequestCreation(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	gh.loseCreate = true
	s = step(t, m, c, s)
	if s.Phase != PhasePullRequest || s.PhaseAttempts != 1 || len(gh.prs) != 1 {
		t.Fatalf("after lost answer: %+v, %d prs", s, len(gh.prs))
	}
	s = step(t, m, c, s)
	if s.Phase != PhaseCI || s.PRNumber != 1 || len(gh.prs) != 1 || gh.count("create") != 1 {
		t.Fatalf("reconciled: %+v, %d prs, %d creates", s, len(gh.prs), gh.count("create"))
	}
}

func TestPullRequestExistsRace(t *testing.T) {
	// The look finds nothing, then creation says one exists (a concurrent
	// or lost creation): the next look adopts it.
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	gh.failCreate = func() error {
		gh.prs = append(gh.prs, PullRequest{Number: 1, URL: "https://github.com/o/r/pull/1", State: "open",
			HeadSHA: cand, HeadRef: s.Branch, BaseRef: "main"})
		gh.failCreate = nil
		return &Error{Kind: KindPRExists}
	}
	s = step(t, m, c, s)
	s = step(t, m, c, s)
	if s.Phase != PhaseCI || s.PRNumber != 1 || len(gh.prs) != 1 {
		t.Fatalf("%+v, %d prs", s, len(gh.prs))
	}
}

func TestLostMergeAnswer(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for s.Phase != PhaseMerge {
		s = step(t, m, c, s)
	}
	gh.loseMerge = true
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged || s.MergeSHA != "m1" || gh.mergeReq != 1 || gh.merges != 1 {
		t.Fatalf("%+v, %d merge requests", s, gh.mergeReq)
	}
}

func TestMergeRefusalsAreFinal(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		code string
	}{{KindHeadMoved, CodeHeadMoved}, {KindNotMergeable, CodeMergeRefused}} {
		m, gh, c, s := setup(t)
		gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
		k := tc.kind
		gh.failMerge = func() error { return &Error{Kind: k} }
		s = runToEnd(t, m, c, s)
		if s.Code != tc.code || gh.mergeReq != 1 {
			t.Errorf("kind %d: code %s, %d merge requests (want 1)", tc.kind, s.Code, gh.mergeReq)
		}
	}
	// The head moved before the merge: no merge request at all.
	m, gh, c, s := setup(t)
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for s.Phase != PhaseMerge {
		s = step(t, m, c, s)
	}
	gh.prs[0].HeadSHA = "3333333333333333333333333333333333333333"
	s = step(t, m, c, s)
	if s.Code != CodeHeadMoved || gh.mergeReq != 0 {
		t.Fatalf("code %s, %d merge requests", s.Code, gh.mergeReq)
	}
}

func TestFailureTable(t *testing.T) {
	cases := []struct {
		kind Kind
		code string
	}{
		{KindPermission, CodePermissionDenied},
		{KindNotInstalled, CodeNotInstalled},
		{KindNotFound, CodeRepositoryNotFound},
		{KindPushRejected, CodePushRejected},
		{KindWorkflowPermission, CodeWorkflowPermission},
		{KindNoCommits, CodePRRefused},
		{KindHeadMoved, CodeHeadMoved},
		{KindNotMergeable, CodeMergeRefused},
		{KindSecret, CodeSecretInCandidate},
	}
	for _, tc := range cases {
		m, _, c, s := setup(t)
		got := m.onError(s, &Error{Kind: tc.kind})
		if got.Phase != PhaseFailed || got.Code != tc.code || !ValidCode(got.Code) {
			t.Errorf("kind %d: %s %s", tc.kind, got.Phase, got.Code)
		}
		_ = c
	}
	for _, code := range []string{CodeCIFailed, CodeCITimedOut, CodeCINoRuns, CodeBaseChanged, CodePRClosed,
		CodeUnavailable, CodeTimedOut} {
		if !ValidCode(code) {
			t.Errorf("%s missing from the table", code)
		}
	}
	if ValidCode("execution_failed") || ValidCode("") {
		t.Error("a code outside the table is valid")
	}
	// Final refusals in the push and pull request phases.
	m, gh, c, s := setup(t)
	gh.secret = &Error{Kind: KindSecret}
	if s = step(t, m, c, s); s.Code != CodeSecretInCandidate || len(gh.branches) != 0 || slices.Contains(gh.calls, "push") {
		t.Errorf("a candidate holding a secret: %s, branches %v, calls %v", s.Code, gh.branches, gh.calls)
	}
	m, gh, c, s = setup(t)
	gh.branches[s.Branch] = "4444444444444444444444444444444444444444"
	if s = step(t, m, c, s); s.Code != CodePushRejected {
		t.Errorf("branch at another commit: %s", s.Code)
	}
	m, gh, c, s = setup(t)
	s = step(t, m, c, s)
	gh.failCreate = func() error { return &Error{Kind: KindNoCommits} }
	if s = step(t, m, c, s); s.Code != CodePRRefused {
		t.Errorf("no commits: %s", s.Code)
	}
	m, gh, c, s = setup(t)
	s = step(t, m, c, s)
	gh.prs = []PullRequest{{Number: 1, State: "closed", HeadSHA: cand, HeadRef: s.Branch, BaseRef: "main"}}
	if s = step(t, m, c, s); s.Code != CodePRClosed {
		t.Errorf("closed pull request: %s", s.Code)
	}
	m, gh, c, s = setup(t)
	s = step(t, m, c, s)
	gh.prs = []PullRequest{{Number: 1, State: "open", HeadSHA: cand, HeadRef: s.Branch, BaseRef: "develop"}}
	if s = step(t, m, c, s); s.Code != CodeBaseChanged {
		t.Errorf("other base: %s", s.Code)
	}
	m, gh, c, s = setup(t)
	s = step(t, m, c, s)
	gh.prs = []PullRequest{{Number: 1, State: "open", HeadSHA: "5555555555555555555555555555555555555555", HeadRef: s.Branch, BaseRef: "main"}}
	if s = step(t, m, c, s); s.Code != CodeHeadMoved {
		t.Errorf("pull request at another head: %s", s.Code)
	}
}

func TestTransientRetriesOnlyThePhase(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	n := 0
	gh.failFind = func() error { n++; return errors.New("connection reset") }
	start := c.Now()
	s = step(t, m, c, s)
	if s.Phase != PhasePullRequest || s.PhaseAttempts != 1 || !s.NextAt.Equal(start.Add(5*time.Second)) {
		t.Fatalf("first failure: %+v", s)
	}
	s = step(t, m, c, s)
	if s.PhaseAttempts != 2 || !s.NextAt.Equal(start.Add(5*time.Second+10*time.Second)) {
		t.Fatalf("second failure: attempts %d next %v", s.PhaseAttempts, s.NextAt.Sub(start))
	}
	s = step(t, m, c, s)
	if s.Code != CodeUnavailable || n != 3 {
		t.Fatalf("third failure: %s after %d tries", s.Code, n)
	}
	if gh.count("push") != 1 {
		t.Fatalf("push repeated: %d", gh.count("push"))
	}
	// A success resets the phase's attempts.
	m, gh, c, s = setup(t)
	fails := 2
	gh.failPush = func() error {
		if fails > 0 {
			fails--
			return &Error{Kind: KindTransient}
		}
		return nil
	}
	s = step(t, m, c, step(t, m, c, step(t, m, c, s)))
	if s.Phase != PhasePullRequest || s.PhaseAttempts != 0 {
		t.Fatalf("after recovery: %+v", s)
	}
}

func TestTokenRenewedBeforeExpiry(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.tokenTTL = 20 * time.Minute
	s = step(t, m, c, step(t, m, c, s)) // push and pull request: one token
	if gh.mints != 1 {
		t.Fatalf("mints %d", gh.mints)
	}
	gh.setRuns(Run{HeadSHA: cand, Status: "in_progress"})
	c.Advance(16 * time.Minute) // 4 minutes left: inside the margin
	s = step(t, m, c, s)
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged {
		t.Fatalf("%+v", s)
	}
	if gh.mints != 2 {
		t.Fatalf("mints %d, want a fresh token for the merge", gh.mints)
	}
	// fakeGitHub.use fails the test if any call used a token at or past
	// its expires_at. A mint answering an already-expiring token is not used.
	m, gh, c, s = setup(t)
	gh.tokenTTL = time.Minute
	s = step(t, m, c, s)
	if s.Phase != PhasePush || s.PhaseAttempts != 1 || gh.count("push") != 0 {
		t.Fatalf("short-lived token used: %+v", s)
	}
}

func TestRateLimitBackOff(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.setRuns(Run{HeadSHA: cand, Status: "in_progress"})
	now := c.Now()
	retryAt := now.Add(10 * time.Minute)
	gh.failRuns = func() error { return &Error{Kind: KindRateLimited, RetryAt: retryAt} }
	s = step(t, m, c, s)
	if !s.NextAt.Equal(retryAt) || s.PhaseAttempts != 0 || s.Phase != PhaseCI {
		t.Fatalf("with a reset: %+v", s)
	}
	gh.failRuns = func() error { return &Error{Kind: KindRateLimited} }
	s = step(t, m, c, s)
	if !s.NextAt.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("without a time: waits %v", s.NextAt.Sub(c.Now()))
	}
	gh.failRuns = nil
	// 30 requests left for the next 30 minutes: one a minute, not every 10s.
	gh.rate = RateLimit{Limit: 60, Remaining: 30, Reset: s.NextAt.Add(30 * time.Minute)}
	s = step(t, m, c, s)
	if got := s.NextAt.Sub(c.Now()); got != time.Minute {
		t.Fatalf("spread poll %v, want 1m", got)
	}
	gh.rate = RateLimit{Limit: 60, Remaining: 0, Reset: s.NextAt.Add(2 * time.Minute)}
	s = step(t, m, c, s)
	if got := s.NextAt.Sub(c.Now()); got != 2*time.Minute {
		t.Fatalf("exhausted: poll after %v, want the reset", got)
	}
	gh.rate = RateLimit{Limit: 5000, Remaining: 4000, Reset: s.NextAt.Add(time.Minute)}
	s = step(t, m, c, s)
	if got := s.NextAt.Sub(c.Now()); got != 10*time.Second {
		t.Fatalf("ample budget: poll after %v, want poll_interval", got)
	}
	// The last answer's reading is what the Gate's metrics show.
	if b := m.Budgets(); len(b) != 1 || b[0].Name != "" || b[0].Rate != gh.rate {
		t.Fatalf("budgets %+v", b)
	}
}

func TestConditionalPolling(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.setRuns(Run{HeadSHA: cand, Status: "queued"})
	s = step(t, m, c, s)
	if gh.lastIfNoneMatch != "" || s.ETag != `"e1"` || s.CIState != CIPending {
		t.Fatalf("first poll: sent %q, %+v", gh.lastIfNoneMatch, s)
	}
	s = step(t, m, c, s)
	if gh.lastIfNoneMatch != `"e1"` || s.CIState != CIPending || s.Phase != PhaseCI {
		t.Fatalf("304 poll: sent %q, %+v", gh.lastIfNoneMatch, s)
	}
	// 304 while no run exists still ends at the grace.
	m, gh, c, s = setup(t)
	s = step(t, m, c, step(t, m, c, s))
	s = runToEnd(t, m, c, s)
	if s.Code != CodeCINoRuns || gh.lastIfNoneMatch != `"e0"` {
		t.Fatalf("%s, last If-None-Match %q", s.Code, gh.lastIfNoneMatch)
	}
}

func TestMergedByAPersonIsDelivered(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, s)
	gh.prs = []PullRequest{{Number: 7, URL: "u", State: "closed", Merged: true, MergeCommitSHA: "mx", HeadSHA: cand,
		HeadRef: s.Branch, BaseRef: "main"}}
	s = step(t, m, c, s)
	if s.Phase != PhaseMerged || s.MergeSHA != "mx" || gh.mergeReq != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestTokenNeverInState(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{HeadSHA: cand, Status: "completed", Conclusion: "success"})
	for !s.Phase.Terminal() {
		s = step(t, m, c, s)
		if got := fmtState(s); containsToken(got) {
			t.Fatalf("state renders a token: %s", got)
		}
	}
	if (Token{Secret: "ghs_secret"}).String() != "[token]" || fmt.Sprintf("%v %+v %#v", Token{Secret: "ghs_secret"}, Token{Secret: "ghs_secret"}, Token{Secret: "ghs_secret"}) != "[token] [token] [token]" {
		t.Fatal("token renders its value")
	}
}

// TestPullRequestBodyReportsUsage: the pull request's body names the
// candidate and the job's model gateway usage, or says it was not
// metered.
func TestPullRequestBodyReportsUsage(t *testing.T) {
	for _, c := range []struct {
		usage *Usage
		want  string
	}{
		{&Usage{Requests: 7, InputTokens: 52000, OutputTokens: 3100, CachedTokens: 40000},
			"Model usage (all attempts, as the providers reported it): 7 requests, 52000 input tokens (40000 cached), 3100 output tokens."},
		{nil, "Model usage: not metered"},
	} {
		m, gh, clk, s := setup(t)
		s.Usage = c.usage
		s = step(t, m, clk, s) // push
		s = step(t, m, clk, s) // pull request
		if s.Phase != PhaseCI || len(gh.bodies) != 1 {
			t.Fatalf("after pull request: %s, %d bodies", s.Phase, len(gh.bodies))
		}
		if b := gh.bodies[0]; !strings.Contains(b, cand) || !strings.Contains(b, c.want) {
			t.Fatalf("body %q lacks %q", b, c.want)
		}
	}
}

// TestDescriberWritesThePullRequest: a Describer's title and body are the
// pull request's; its failure retries the phase and creates nothing.
func TestDescriberWritesThePullRequest(t *testing.T) {
	m, gh, clk, s := setup(t)
	fail := true
	m.Describe(func(_ context.Context, st State) (string, string, error) {
		if fail {
			return "", "", errors.New("store busy")
		}
		return "Fix the parser", "Fixes #7 (job " + st.JobID + ")", nil
	})
	s = step(t, m, clk, s) // push
	s = step(t, m, clk, s) // pull request: the describer fails
	if s.Phase != PhasePullRequest || s.PhaseAttempts != 1 || len(gh.bodies) != 0 {
		t.Fatalf("after a failed describer: %s, %d attempts, %d bodies", s.Phase, s.PhaseAttempts, len(gh.bodies))
	}
	fail = false
	s = step(t, m, clk, s)
	if s.Phase != PhaseCI || len(gh.bodies) != 1 || gh.bodies[0] != "Fixes #7 (job "+s.JobID+")" {
		t.Fatalf("after pull request: %s, bodies %q", s.Phase, gh.bodies)
	}
}

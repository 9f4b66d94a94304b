package delivery

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// Behaviour of GitHub that delivery must follow (issue 26); each test
// failed against the machine before it learnt the behaviour.

// A candidate that changes .github/workflows: every token of the
// delivery (push, pull request, CI reads, merge) carries workflows
// write, as GitHub refuses an App's merge of it otherwise.
func TestWorkflowCandidateUsesWorkflowsTokensThroughout(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.touches, gh.wfGranted = true, true
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged || gh.merges != 1 {
		t.Fatalf("workflow candidate: %+v", s)
	}
	if gh.count("touches") != 1 {
		t.Fatalf("asked %d times whether the candidate touches workflows, want once", gh.count("touches"))
	}

	// A restarted Gate forgets it and asks again before its first token.
	m2, err := NewMachine(gh, testConfig(), c)
	if err != nil {
		t.Fatal(err)
	}
	s2 := New("job2", testRepo, "main", cand, c.Now())
	s2.Workflows = workflowsUnknown
	gh.branches = map[string]string{}
	gh.prs = nil
	s2 = runToEnd(t, m2, c, s2)
	if s2.Phase != PhaseMerged || gh.count("touches") != 2 {
		t.Fatalf("after restart: %+v, %d asks", s2, gh.count("touches"))
	}

	// Without the permission: workflow_permission_denied, nothing pushed.
	m, gh, c, s = setup(t)
	gh.touches = true
	s = runToEnd(t, m, c, s)
	if s.Code != CodeWorkflowPermission || gh.count("push") != 0 {
		t.Fatalf("no workflows permission: %+v, %d pushes", s, gh.count("push"))
	}
}

// Push-event runs exist at push time; pull_request runs appear later. A
// quickly skipped push run alone is not a pass while the pull request is
// younger than no_runs_grace, and a success needs the same runs twice.
func TestSkippedPushRunDoesNotPassBeforeThePullRequestRuns(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "skipped"})
	s = step(t, m, c, step(t, m, c, s))
	if s.Phase != PhaseCI {
		t.Fatalf("phase %s", s.Phase)
	}
	grace := testConfig().NoRunsGrace
	for c.Now().Before(s.CIStartedAt.Add(grace - 30*time.Second)) {
		s = step(t, m, c, s)
		if s.Phase != PhaseCI {
			t.Fatalf("left ci on the skipped push run alone at %v: %+v", c.Now().Sub(s.CIStartedAt), s)
		}
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "skipped"},
		Run{ID: 2, HeadSHA: cand, Status: "in_progress"})
	for i := 0; i < 5; i++ {
		s = step(t, m, c, s)
		if s.Phase != PhaseCI || s.CIState != CIPending {
			t.Fatalf("pull_request run in progress: %+v", s)
		}
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "skipped"},
		Run{ID: 2, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = step(t, m, c, s)
	if s.Phase != PhaseCI {
		t.Fatalf("one passing answer is not two: %+v", s)
	}
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged {
		t.Fatalf("%+v", s)
	}

	// A failure needs no confirmation.
	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "cancelled"})
	s = step(t, m, c, step(t, m, c, s))
	s = step(t, m, c, s)
	if s.Code != CodeCIFailed {
		t.Fatalf("a cancelled run: %+v", s)
	}
}

// 405 "Base branch was modified" is retried after re-reading the pull
// request; another 405 and merged:false are final; a refusal of a pull
// request that is in fact merged (the first answer was lost) is merged.
func TestMergeAnswersByClass(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = toMerge(t, m, c, s)
	tries := 0
	gh.failMerge = func() error {
		if tries++; tries == 1 {
			return &Error{Kind: KindBaseModified}
		}
		return nil
	}
	gets := gh.count("get")
	s = step(t, m, c, s)
	if s.Phase != PhaseMerge || s.PhaseAttempts != 1 {
		t.Fatalf("base modified: %+v", s)
	}
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged || gh.mergeReq != 2 || gh.count("get") < gets+2 {
		t.Fatalf("retried merge: %+v, %d merge requests, %d reads", s, gh.mergeReq, gh.count("get")-gets)
	}

	// Base modified every time: merge_refused after max_attempts.
	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = toMerge(t, m, c, s)
	gh.failMerge = func() error { return &Error{Kind: KindBaseModified} }
	s = runToEnd(t, m, c, s)
	if s.Code != CodeMergeRefused || gh.mergeReq != testConfig().MaxAttempts {
		t.Fatalf("always base modified: %+v, %d merge requests", s, gh.mergeReq)
	}

	// 200 merged:false: merge_refused, never retried.
	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = toMerge(t, m, c, s)
	gh.notMerged = true
	s = runToEnd(t, m, c, s)
	if s.Code != CodeMergeRefused || gh.mergeReq != 1 {
		t.Fatalf("merged false: %+v, %d merge requests", s, gh.mergeReq)
	}

	// Merged, but the answer that said so was lost and the next try was
	// refused (the pull request is no longer open): asked once more, merged.
	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	s = toMerge(t, m, c, s)
	gh.mergedBehind = true
	s = runToEnd(t, m, c, s)
	if s.Phase != PhaseMerged || s.MergeSHA == "" {
		t.Fatalf("refused but merged: %+v", s)
	}
}

// A 422 on creation other than "no commits" or "already exists" (head
// invalid right after the push) is retried, a bounded number of times.
func TestPRCreationHeadInvalidIsRetried(t *testing.T) {
	m, gh, c, s := setup(t)
	n := 0
	gh.failCreate = func() error {
		if n++; n == 1 {
			return &Error{Kind: KindPRInvalid}
		}
		return nil
	}
	s = step(t, m, c, step(t, m, c, s))
	if s.Phase != PhasePullRequest || s.PhaseAttempts != 1 {
		t.Fatalf("head invalid: %+v", s)
	}
	s = step(t, m, c, s)
	if s.Phase != PhaseCI || s.PRNumber != 1 {
		t.Fatalf("retried creation: %+v", s)
	}

	m, gh, c, s = setup(t)
	gh.failCreate = func() error { return &Error{Kind: KindPRInvalid} }
	s = runToEnd(t, m, c, s)
	if s.Code != CodePRRefused || gh.count("create") != testConfig().MaxAttempts {
		t.Fatalf("always invalid: %+v, %d creations", s, gh.count("create"))
	}
}

// A person closes or merges the pull request while CI runs: the CI phase
// reads it and ends at once.
func TestPullRequestChangedByAPersonDuringCI(t *testing.T) {
	m, gh, c, s := setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
	s = step(t, m, c, step(t, m, c, step(t, m, c, s)))
	gh.prs[0].State = "closed"
	s = step(t, m, c, s)
	if s.Code != CodePRClosed || gh.mergeReq != 0 {
		t.Fatalf("closed during ci: %+v", s)
	}

	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
	s = step(t, m, c, step(t, m, c, step(t, m, c, s)))
	gh.prs[0].State, gh.prs[0].Merged, gh.prs[0].MergeCommitSHA = "closed", true, "3333333333333333333333333333333333333333"
	s = step(t, m, c, s)
	if s.Phase != PhaseMerged || s.MergeSHA != "3333333333333333333333333333333333333333" || gh.mergeReq != 0 {
		t.Fatalf("merged by a person during ci: %+v", s)
	}

	// Runs still pending at the timeout: ci_timed_out.
	m, gh, c, s = setup(t)
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
	s = runToEnd(t, m, c, s)
	if s.Code != CodeCITimedOut {
		t.Fatalf("pending at the timeout: %+v", s)
	}
}

// DECISIONS 16: with actions: read granted, runs are read with the
// installation's token and paced from its budget; without, they are read
// unauthenticated and paced from the shared 60 an hour.
func TestRunsReadWithActionsReadToken(t *testing.T) {
	for _, granted := range []bool{false, true} {
		m, gh, c, s := setup(t)
		gh.actionsRead = granted
		gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
		if granted {
			gh.rate = RateLimit{Limit: 5000, Remaining: 4000, Reset: c.Now().Add(time.Hour)}
		} else {
			gh.rate = RateLimit{Limit: 60, Remaining: 50, Reset: c.Now().Add(time.Hour)}
		}
		s = step(t, m, c, step(t, m, c, s))
		at := c.Now()
		s = step(t, m, c, s)
		wait := s.NextAt.Sub(at)
		for _, auth := range gh.runsAuth {
			if auth != granted {
				t.Fatalf("actions read %v: a runs read authenticated=%v", granted, auth)
			}
		}
		if granted && wait != testConfig().PollInterval {
			// 3500 usable requests over an hour: ~1 s each, poll_interval wins.
			t.Fatalf("token pacing: next poll in %v", wait)
		}
		if want := gh.rate.Reset.Sub(at) / 50; !granted && wait != want {
			t.Fatalf("unauthenticated pacing: next poll in %v, want %v", wait, want)
		}
	}
}

// Deliveries entering CI at any time take their turn in the shared
// unauthenticated budget: 100 of them never send more runs reads in the
// hour than the 60 the budget holds.
func TestManyDeliveriesKeepToTheUnauthenticatedBudget(t *testing.T) {
	_, gh, c, _ := setup(t)
	cfg := testConfig()
	cfg.Timeout = 2 * time.Hour
	m, err := NewMachine(gh, cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "in_progress"})
	gh.spend = true
	gh.rate = RateLimit{Limit: 60, Remaining: 60, Reset: c.Now().Add(time.Hour)}
	end := gh.rate.Reset
	var states []State
	for i := 0; i < 100; i++ {
		s := New("job"+strconv.Itoa(i), testRepo, "main", cand, c.Now())
		s.Branch = "forge/job-" + strconv.Itoa(i)
		states = append(states, s)
	}
	for c.Now().Before(end) {
		// Step every due delivery, then move to the next due time.
		next := end
		for i := range states {
			if s := states[i]; !s.NextAt.After(c.Now()) && !s.Phase.Terminal() {
				n, err := m.Step(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				states[i] = n
			}
			if s := states[i]; !s.Phase.Terminal() && s.NextAt.Before(next) {
				next = s.NextAt
			}
		}
		if next.After(c.Now()) {
			c.Advance(next.Sub(c.Now()))
		}
	}
	if gh.overBudget != 0 || gh.count("runs") > 60 {
		t.Fatalf("%d runs reads in the hour, %d over the budget", gh.count("runs"), gh.overBudget)
	}
	if gh.count("runs") < 50 {
		t.Fatalf("only %d runs reads in the hour: the budget went unused", gh.count("runs"))
	}
}

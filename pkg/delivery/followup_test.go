package delivery

import (
	"testing"
)

const cand2 = "2222222222222222222222222222222222222222"

// followup is the delivery of a follow-up job of job1's pull request: its
// candidate goes to job1's branch, over job1's candidate.
func followup(s State) State {
	f := New("job2", s.Repo, s.BaseBranch, cand2, s.NextAt)
	f.Branch, f.PushOver = s.Branch, cand
	return f
}

// A follow-up's candidate is one more commit on the pull request's
// branch: pushed over the previous head, the same pull request adopted,
// CI read for the new head, merged at exactly it.
func TestFollowupPushesToTheSameBranchAndPullRequest(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	if s.Phase != PhaseCI || s.PRNumber != 1 {
		t.Fatalf("first delivery: %+v", s)
	}
	// The store ended the first delivery (superseded); the follow-up starts.
	f := followup(s)
	f = step(t, m, c, f)
	if f.Phase != PhasePullRequest || gh.branches["forge/job-job1"] != cand2 || len(gh.branches) != 1 {
		t.Fatalf("after push: %+v, branches %v", f, gh.branches)
	}
	f = step(t, m, c, f)
	if f.Phase != PhaseCI || f.PRNumber != 1 || gh.count("create") != 1 {
		t.Fatalf("pull request: %+v, %d created", f, gh.count("create"))
	}
	// Runs of the previous head do not count for the new one.
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"})
	f = step(t, m, c, f)
	if f.Phase != PhaseCI || f.CIState != CIWaiting {
		t.Fatalf("runs of the old head counted: %+v", f)
	}
	gh.setRuns(Run{ID: 1, HeadSHA: cand, Status: "completed", Conclusion: "success"},
		Run{ID: 2, HeadSHA: cand2, Status: "completed", Conclusion: "success"})
	f = runToEnd(t, m, c, f)
	if f.Phase != PhaseMerged || gh.merges != 1 || gh.prs[0].HeadSHA != cand2 {
		t.Fatalf("follow-up: %+v, %d merges, head %s", f, gh.merges, gh.prs[0].HeadSHA)
	}
	// Pushing again after a lost answer is success: the branch is at it.
	tok, err := gh.MintToken(t.Context(), testRepo, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := gh.Push(t.Context(), tok, testRepo, "forge/job-job1", cand2, cand); err != nil {
		t.Fatal(err)
	}
}

// Someone pushed to the branch after the trigger: the follow-up fails
// base_moved and nothing is pushed over their commit.
func TestFollowupBaseMoved(t *testing.T) {
	m, gh, c, s := setup(t)
	s = step(t, m, c, step(t, m, c, s))
	gh.branches["forge/job-job1"] = "3333333333333333333333333333333333333333"
	f := step(t, m, c, followup(s))
	if f.Phase != PhaseFailed || f.Code != CodeBaseMoved || gh.branches["forge/job-job1"] != "3333333333333333333333333333333333333333" {
		t.Fatalf("moved branch: %+v, branch %s", f, gh.branches["forge/job-job1"])
	}
	// A branch that is gone is moved too.
	m, gh, c, s = setup(t)
	s = step(t, m, c, step(t, m, c, s))
	delete(gh.branches, "forge/job-job1")
	if f := step(t, m, c, followup(s)); f.Code != CodeBaseMoved || len(gh.branches) != 0 {
		t.Fatalf("deleted branch: %+v", f)
	}
}

package gate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// stalledGitHub never lets a delivery move: every token is rate limited
// for an hour, so a delivery stays where the test puts it.
type stalledGitHub struct{ happyGitHub }

func (*stalledGitHub) MintToken(context.Context, delivery.Repo, bool) (delivery.Token, error) {
	return delivery.Token{}, &delivery.Error{Kind: delivery.KindRateLimited, RetryAt: time.Now().Add(time.Hour)}
}

// followupGate is a public-source Gate with delivery (stalled) and intake
// whose job orig delivered its candidate (returned) as pull request 3,
// waiting for CI.
func followupGate(t *testing.T) (tg *testGate, work, first, cand string, orig store.Job) {
	t.Helper()
	key := writeAppKey(t)
	tg, work, first = publicGateSetup(t, false, func(g *Gate) {
		if err := g.EnableDelivery(&stalledGitHub{}); err != nil {
			t.Fatal(err)
		}
	}, func(m map[string]any) {
		m["delivery"] = deliverySection(key)
		repo0(m)["intake"] = map[string]any{"checks": [][]string{{"make", "test"}}}
	})
	ctx := context.Background()
	orig = tg.submit(`{"repository_id":"agent-forge","base_sha":"` + first + `","instruction":"Fix it."}`)
	// The Worker's candidate, in the Gate's repository under its ref.
	prepared := filepath.Join(tg.cfg.PublicRepositoryRoot, source.DirName(testPublicURL))
	runGit(t, work, "commit", "-q", "--allow-empty", "-m", "candidate")
	cand = runGit(t, work, "rev-parse", "HEAD")
	runGit(t, work, "push", "-q", prepared, cand+":refs/agent-forge/candidates/"+strings.Repeat("a", 32)+"/"+strings.Repeat("b", 32))
	now := time.Now()
	if err := tg.st.ConnectLane(ctx, "direct", "worker-1", 0, "g1", now); err != nil {
		t.Fatal(err)
	}
	l, err := tg.st.Lease(ctx, "direct", "g1", "coding", []string{"codex", "reference"}, []string{"agent-forge"}, now)
	if err != nil || l == nil || l.JobID != orig.ID {
		t.Fatalf("lease %+v %v", l, err)
	}
	fence := store.Fence{JobID: orig.ID, AttemptID: l.AttemptID, Lane: "direct", Generation: "g1"}
	if _, err := tg.st.AddEvidence(ctx, fence, 1, []json.RawMessage{json.RawMessage(`{"phase":"candidate_commit"}`)}, cand, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.st.Complete(ctx, fence, store.Outcome{Succeeded: true, CandidateSHA: cand}, now); err != nil {
		t.Fatal(err)
	}
	// Its delivery opened pull request 3 and waits for CI.
	d, err := tg.st.Delivery(ctx, orig.ID)
	if err != nil {
		t.Fatal(err)
	}
	ci := d
	ci.Phase, ci.PRNumber, ci.PRURL, ci.CIState = store.DeliveryCI, 3, "https://github.com/octo-org/hello/pull/3", "waiting"
	if err := tg.st.SaveDelivery(ctx, d, ci, now); err != nil {
		t.Fatal(err)
	}

	return tg, work, first, cand, orig
}

// codeFollowup runs job id's attempt to success with a new commit on
// top of base, stored as a Worker's candidate, and moves its delivery to
// ci on pull request 3; it returns the commit.
func codeFollowup(t *testing.T, tg *testGate, work, id, base string) string {
	t.Helper()
	ctx := context.Background()
	runGit(t, work, "checkout", "-q", "--detach", base)
	runGit(t, work, "commit", "-q", "--allow-empty", "-m", "follow-up "+id)
	sha := runGit(t, work, "rev-parse", "HEAD")
	prepared := filepath.Join(tg.cfg.PublicRepositoryRoot, source.DirName(testPublicURL))
	runGit(t, work, "push", "-q", prepared, sha+":refs/agent-forge/candidates/"+id+"/"+strings.Repeat("b", 32))
	now := time.Now()
	l, err := tg.st.Lease(ctx, "direct", "g1", "coding", []string{"codex", "reference"}, []string{"agent-forge"}, now)
	if err != nil || l == nil || l.JobID != id {
		t.Fatalf("lease %+v %v", l, err)
	}
	fence := store.Fence{JobID: id, AttemptID: l.AttemptID, Lane: "direct", Generation: "g1"}
	if _, err := tg.st.AddEvidence(ctx, fence, 1, []json.RawMessage{json.RawMessage(`{"phase":"candidate_commit"}`)}, sha, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.st.Complete(ctx, fence, store.Outcome{Succeeded: true, CandidateSHA: sha}, now); err != nil {
		t.Fatal(err)
	}
	d, err := tg.st.Delivery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ci := d
	ci.Phase, ci.PRNumber, ci.PRURL, ci.CIState = store.DeliveryCI, 3, "https://github.com/octo-org/hello/pull/3", "waiting"
	if err := tg.st.SaveDelivery(ctx, d, ci, now); err != nil {
		t.Fatal(err)
	}
	return sha
}

// The follow-up path of a command on a delivered pull request: a job on
// the pull request's head, with the review comment's place in its
// instruction, the waiting delivery superseded; the same command again
// answers the same job without reading GitHub; a head that is not a
// candidate of the Gate's, or a pull request it did not deliver, starts
// nothing and says why.
func TestFollowupCommandStartsAJobOnThePullRequestsHead(t *testing.T) {
	tg, _, first, cand, orig := followupGate(t)
	ctx := context.Background()
	now := time.Now()
	reads := 0
	head := cand
	read := func(_ context.Context, repo intake.Repo, n int) (pullView, error) {
		reads++
		return pullView{Open: true, HeadSHA: head, Title: "Fix it", Body: "Fixes #2", Author: "agent-forge[bot]"}, nil
	}
	repo := intake.Repo{ID: "agent-forge", Owner: "octo-org", Name: "hello", DefaultBranch: "main",
		Settings: intake.Settings{Command: "/forge", Checks: [][]string{{"make", "test"}}, Merge: intake.MergeReview, MaxFollowups: 5}}
	c := intake.PullComment{Kind: store.TriggerReviewComment, EventID: 77, Number: 3, Actor: "bob", Text: "/forge check for nil here",
		Path: "parse.go", Line: 12, DiffHunk: "@@ -10,3 +10,4 @@\n func parse() {\n+\tx := y", At: now}
	// Someone pushed their own commit to the branch: no job builds on it.
	head = first
	c.EventID = 79
	if r, err := tg.g.followup(ctx, read, repo, c); err != nil || r.Refusal != store.RefusedBaseMoved || strings.Contains(r.Text, "@") {
		t.Fatalf("not a candidate: %+v %v", r, err)
	}
	// A pull request the Gate did not deliver (its head a candidate).
	head = cand
	c.EventID, c.Number = 80, 9
	if r, err := tg.g.followup(ctx, read, repo, c); err != nil || r.Refusal != store.RefusedNotDelivered || r.Text == "" {
		t.Fatalf("not delivered: %+v %v", r, err)
	}
	head, c.EventID, c.Number = cand, 77, 3
	reads = 0
	res, err := tg.g.followup(ctx, read, repo, c)
	if err != nil || res.JobID == "" || res.Refusal != "" {
		t.Fatalf("follow-up: %+v %v", res, err)
	}
	job, err := tg.st.Job(ctx, res.JobID)
	if err != nil || job.Status != store.JobPending || job.BaseSHA != cand {
		t.Fatalf("follow-up job %+v %v", job, err)
	}
	raw, err := tg.st.JobTask(ctx, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var task struct {
		BaseSHA     string     `json:"base_sha"`
		Instruction string     `json:"instruction"`
		Tests       [][]string `json:"tests"`
	}
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatal(err)
	}
	if task.BaseSHA != cand || len(task.Tests) != 1 || !strings.Contains(task.Instruction, "parse.go") ||
		!strings.Contains(task.Instruction, "+\tx := y") || !strings.Contains(task.Instruction, "check for nil here") {
		t.Fatalf("task %+v", task)
	}
	if o, _ := tg.st.Job(ctx, orig.ID); o.Status != store.JobFailed || o.FailureCode != store.CodeSuperseded {
		t.Fatalf("the waiting delivery: %+v", o)
	}
	// Seen again (a re-poll, a restart): the stored answer, nothing read.
	again, err := tg.g.followup(ctx, read, repo, c)
	if err != nil || again.JobID != res.JobID || reads != 1 {
		t.Fatalf("again: %+v %v, %d reads", again, err, reads)
	}
	// Busy: the follow-up is still queued.
	c.EventID = 78
	if r, err := tg.g.followup(ctx, read, repo, c); err != nil || r.Refusal != store.RefusedBusy || r.Text == "" {
		t.Fatalf("busy: %+v %v", r, err)
	}
	if n := tg.jobCount(); n != 2 {
		t.Fatalf("%d jobs", n)
	}

	// Closing the pull request (or removing the label) cancels the
	// follow-up while a lane runs it: the lane is told to stop, the job
	// fails cancelled, what the attempt sends later is refused.
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	fl := w.lease()
	if fl.JobID != res.JobID || fl.BaseSHA != cand {
		t.Fatalf("follow-up lease %+v", fl)
	}
	if err := tg.g.cancelIntake(ctx, "agent-forge", 3); err != nil {
		t.Fatal(err)
	}
	if m := w.push(); m.Cancel == nil || m.Cancel.AttemptID != fl.AttemptID {
		t.Fatalf("want cancel, got %+v", m)
	}
	if j, _ := tg.st.Job(ctx, res.JobID); j.Status != store.JobFailed || j.FailureCode != store.CodeCancelled {
		t.Fatalf("cancelled follow-up %+v", j)
	}
	wantReject(t, w.heartbeat(fl), wire.RejectStale)
}

// Six follow-up commands, each after the previous follow-up's commit
// reached CI: five jobs, then the refusal that says how a person raises
// the limit; the same refused command again answers the same.
func TestSixFollowupsFiveJobsAndARefusal(t *testing.T) {
	tg, work, _, cand, _ := followupGate(t)
	ctx := context.Background()
	head := cand
	read := func(context.Context, intake.Repo, int) (pullView, error) {
		return pullView{Open: true, HeadSHA: head, Title: "Fix it", Author: "agent-forge[bot]"}, nil
	}
	repo := intake.Repo{ID: "agent-forge", Owner: "octo-org", Name: "hello", DefaultBranch: "main",
		Settings: intake.Settings{Command: "/forge", Merge: intake.MergeReview, MaxFollowups: intake.DefaultMaxFollowups}}
	for i := 1; i <= 6; i++ {
		c := intake.PullComment{Kind: store.TriggerComment, EventID: int64(100 + i), Number: 3, Actor: "bob", Text: "/forge more"}
		res, err := tg.g.followup(ctx, read, repo, c)
		if err != nil {
			t.Fatal(err)
		}
		if i == 6 {
			if res.JobID != "" || res.Refusal != store.RefusedLimit || !strings.Contains(res.Text, "max_followups") {
				t.Fatalf("sixth: %+v", res)
			}
			if again, err := tg.g.followup(ctx, read, repo, c); err != nil || again != res {
				t.Fatalf("sixth again: %+v %v", again, err)
			}
			break
		}
		if res.JobID == "" {
			t.Fatalf("follow-up %d: %+v", i, res)
		}
		head = codeFollowup(t, tg, work, res.JobID, head)
	}
	if n := tg.jobCount(); n != 6 {
		t.Fatalf("%d jobs: the first and five follow-ups expected", n)
	}
}

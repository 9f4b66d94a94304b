package githubfake

import (
	"context"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
)

// GitHub's documented behaviour the fake models and delivery (the
// production delivery.App over pkg/github) must follow: issue 26.

var wfPerms = map[string]string{"contents": "write", "pull_requests": "write", "metadata": "read", "workflows": "write"}

// step runs one step of s after waiting until s.NextAt on the virtual clock.
func (d *deliveryFixture) step(t *testing.T, s delivery.State) delivery.State {
	t.Helper()
	if w := s.NextAt.Sub(d.clock.Now()); w > 0 {
		d.clock.Sleep(context.Background(), w)
	}
	next, err := d.m.Step(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// GitHub refuses an App's merge of a workflow change without workflows
// write (403 "Resource not accessible by integration").
func TestFakeRefusesWorkflowMergeWithoutWorkflowsPermission(t *testing.T) {
	d := newDeliveryFixtureWith(t, wfPerms, ".github/workflows/ci.yml")
	ctx := context.Background()
	inst, err := d.client.Installation(ctx, d.jwt(t), "octo", "app")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.client.CreateToken(ctx, d.jwt(t), inst.ID, "app", github.DerivePermissions(nil))
	if err != nil {
		t.Fatal(err)
	}
	d.gh.Push(ctx, delivery.Token{}, delivery.Repo{Owner: "octo", Name: "app"}, "wf", d.sha, "")
	pr, err := d.client.CreatePull(ctx, tok, "octo", "app", "wf", "main", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Merge(ctx, tok, "octo", "app", pr.Number, d.sha); !github.IsClass(err, github.ClassPermission) {
		t.Fatalf("merge of a workflow change without workflows: %v", err)
	}
	if d.rev(t, "refs/heads/main") != d.base {
		t.Fatal("merged anyway")
	}
}

// Item 1: a workflow-changing candidate merges: every token of the
// delivery carries workflows write.
func TestDeliveryMergesAWorkflowChange(t *testing.T) {
	d := newDeliveryFixtureWith(t, wfPerms, ".github/workflows/ci.yml")
	s := d.run(t)
	if s.Phase != delivery.PhaseMerged || d.rev(t, "refs/heads/main^2") != d.sha {
		t.Fatalf("workflow candidate: %+v", s)
	}
	// The installation without workflows: refused before anything is pushed.
	d = newDeliveryFixtureWith(t, basePerms, ".github/workflows/ci.yml")
	if s := d.run(t); s.Code != delivery.CodeWorkflowPermission || d.gh.pushes != 0 {
		t.Fatalf("no workflows permission: %+v, %d pushes", s, d.gh.pushes)
	}
}

// Item 3: a push workflow whose jobs are all skipped concludes at once;
// the pull_request workflow starts later. Merged only after it succeeded.
func TestDeliveryWaitsForThePullRequestRuns(t *testing.T) {
	d := newDeliveryFixture(t)
	d.api.now = d.clock.Now
	err := d.api.SetWorkflows("octo", "app", []Workflow{
		{Name: "lint", Event: "push", Start: time.Second, Duration: 2 * time.Second, Conclusion: "skipped"},
		{Name: "test", Event: "pull_request", Start: 90 * time.Second, Duration: 3 * time.Minute, Conclusion: "success"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := delivery.New("j1", delivery.Repo{Owner: "octo", Name: "app"}, "main", d.sha, d.clock.Now())
	var prAt time.Time
	for i := 0; i < 500 && !s.Phase.Terminal(); i++ {
		s = d.step(t, s)
		if s.Phase == delivery.PhaseCI && prAt.IsZero() {
			prAt = d.clock.Now()
		}
		if s.Phase == delivery.PhaseMerge && d.clock.Now().Before(prAt.Add(90*time.Second+3*time.Minute)) {
			t.Fatalf("merge phase at %v after the pull request, before its run completed", d.clock.Now().Sub(prAt))
		}
	}
	if s.Phase != delivery.PhaseMerged || d.rev(t, "refs/heads/main^2") != d.sha {
		t.Fatalf("%+v", s)
	}

	// A cancelled push run (concurrency: cancel-in-progress) fails it.
	d = newDeliveryFixture(t)
	d.api.now = d.clock.Now
	d.api.SetWorkflows("octo", "app", []Workflow{
		{Name: "ci", Event: "push", Duration: time.Second, Conclusion: "cancelled"},
		{Name: "ci", Event: "pull_request", Start: time.Second, Duration: time.Minute, Conclusion: "success"},
	})
	if s := d.run(t); s.Code != delivery.CodeCIFailed || d.rev(t, "refs/heads/main") != d.base {
		t.Fatalf("cancelled push run: %+v", s)
	}
}

// Item 4: 405 "Base branch was modified" is retried; 200 merged:false
// is merge_refused, never retried.
func TestDeliveryMergeAnswers(t *testing.T) {
	d := newDeliveryFixture(t)
	d.api.SetDeliveryFault(DeliveryFaultBaseModified, 1)
	if s := d.run(t); s.Phase != delivery.PhaseMerged || d.rev(t, "refs/heads/main^2") != d.sha {
		t.Fatalf("base modified once: %+v", s)
	}
	d = newDeliveryFixture(t)
	d.api.SetDeliveryFault(DeliveryFaultMergedFalse, 5)
	if s := d.run(t); s.Code != delivery.CodeMergeRefused || d.rev(t, "refs/heads/main") != d.base {
		t.Fatalf("merged false: %+v", s)
	}
	d.api.ci().mu.Lock()
	left := d.api.ci().faults[DeliveryFaultMergedFalse]
	d.api.ci().mu.Unlock()
	if left != 4 {
		t.Fatalf("merged false: %d merge requests, want 1", 5-left)
	}
}

// Item 6: "head invalid" right after the push is retried.
func TestDeliveryRetriesHeadInvalid(t *testing.T) {
	d := newDeliveryFixture(t)
	d.api.SetDeliveryFault(DeliveryFaultHeadInvalid, 1)
	if s := d.run(t); s.Phase != delivery.PhaseMerged || d.pulls() != 1 {
		t.Fatalf("head invalid once: %+v, %d pulls", s, d.pulls())
	}
}

// Item 7: a person closes or merges the pull request during CI.
func TestDeliveryPullRequestActedOnDuringCI(t *testing.T) {
	for _, act := range []string{"close", "merge"} {
		d := newDeliveryFixture(t)
		d.api.now = d.clock.Now
		d.api.SetWorkflows("octo", "app", []Workflow{{Name: "test", Event: "pull_request", Duration: 20 * time.Minute, Conclusion: "success"}})
		s := delivery.New("j1", delivery.Repo{Owner: "octo", Name: "app"}, "main", d.sha, d.clock.Now())
		for s.Phase != delivery.PhaseCI {
			s = d.step(t, s)
		}
		s = d.step(t, s)
		if err := d.api.PersonAct("octo", "app", s.PRNumber, act); err != nil {
			t.Fatal(err)
		}
		s = d.step(t, s)
		switch act {
		case "close":
			if s.Code != delivery.CodePRClosed {
				t.Fatalf("closed: %+v", s)
			}
		case "merge":
			if s.Phase != delivery.PhaseMerged || s.MergeSHA != d.rev(t, "refs/heads/main") || d.rev(t, "refs/heads/main^2") != d.sha {
				t.Fatalf("merged by a person: %+v", s)
			}
		}
	}
}

// DECISIONS 16: with actions: read granted, runs are read with a token
// (the installation's budget, the address's untouched) and a 304 is free.
func TestDeliveryReadsRunsWithActionsRead(t *testing.T) {
	perms := map[string]string{"contents": "write", "pull_requests": "write", "metadata": "read", "actions": "read"}
	d := newDeliveryFixtureWith(t, perms, "change.txt")
	if s := d.run(t); s.Phase != delivery.PhaseMerged {
		t.Fatalf("%+v", s)
	}
	d.api.mu.Lock()
	ip := d.api.budgets[budgetIP]
	d.api.mu.Unlock()
	if ip != nil && ip.used > 0 {
		t.Fatalf("%d unauthenticated requests with actions: read granted", ip.used)
	}
	ctx := context.Background()
	tok, err := d.client.CreateToken(ctx, d.jwt(t), 77, "app", github.Permissions{"actions": "read"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.client.ListRuns(ctx, tok, "octo", "app", d.sha, "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.client.ListRuns(ctx, tok, "octo", "app", d.sha, p.ETag)
	if err != nil || !again.NotModified || again.Rate.Remaining != p.Rate.Remaining || p.Rate.Limit != rateLimit {
		t.Fatalf("authorized 304: %+v then %+v, %v", p.Rate, again.Rate, err)
	}

	// Without it: unauthenticated.
	d = newDeliveryFixture(t)
	if s := d.run(t); s.Phase != delivery.PhaseMerged {
		t.Fatalf("%+v", s)
	}
	d.api.mu.Lock()
	ip = d.api.budgets[budgetIP]
	d.api.mu.Unlock()
	if ip == nil || ip.used == 0 {
		t.Fatal("no unauthenticated runs read without actions: read")
	}
}

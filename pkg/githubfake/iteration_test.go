package githubfake

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// Iteration on a delivered pull request (DECISIONS 18) end to end below
// the Gate: the real store (SQLite), the real delivery machine over
// pkg/github and the fake GitHub, the people acting through the fake.

// iterationFixture is a deliveryFixture with a store whose jobs it
// completes as a Worker would (the candidate under its ref).
type iterationFixture struct {
	*deliveryFixture
	t    *testing.T
	st   *store.Store
	work string
}

func iterationPolicy() []byte {
	return policy.Resolve(policy.Lifecycle{LeaseTTL: policy.Duration(time.Minute), RetryBase: policy.Duration(time.Second), MaxAttempts: 1},
		policy.Execution{PluginID: "reference", Environment: []string{"PATH"},
			PluginTimeout: policy.Duration(time.Minute), CheckTimeout: policy.Duration(time.Minute),
			GitTimeout: policy.Duration(time.Minute), CleanupTimeout: policy.Duration(time.Second),
			PluginOutputBytes: 1 << 20, CheckOutputBytes: 2048, GitOutputBytes: 1 << 20}).Canonical()
}

func (f *iterationFixture) job(id, base string) store.NewJob {
	return store.NewJob{ID: id, Kind: store.KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "app",
		BaseSHA: base, Policy: iterationPolicy(), Delivery: &store.DeliveryTarget{Owner: "octo", Repo: "app", BaseBranch: "main"}}
}

// code runs job id's one attempt to success with candidate sha.
func (f *iterationFixture) code(id, sha string) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.st.ConnectLane(ctx, "w", "worker-1", 0, strings.Repeat("1", 32), f.clock.Now()); err != nil {
		f.t.Fatal(err)
	}
	l, err := f.st.Lease(ctx, "w", strings.Repeat("1", 32), "coding", []string{"reference"}, []string{"app"}, f.clock.Now())
	if err != nil || l == nil || l.JobID != id {
		f.t.Fatalf("lease %+v %v", l, err)
	}
	fence := store.Fence{JobID: id, AttemptID: l.AttemptID, Lane: "w", Generation: strings.Repeat("1", 32)}
	if _, err := f.st.AddEvidence(ctx, fence, 1, []json.RawMessage{json.RawMessage(`{"phase":"candidate_commit"}`)}, sha, f.clock.Now()); err != nil {
		f.t.Fatal(err)
	}
	if c, err := f.st.Complete(ctx, fence, store.Outcome{Succeeded: true, CandidateSHA: sha}, f.clock.Now()); err != nil || c.JobStatus != store.JobDelivering {
		f.t.Fatalf("complete %+v %v", c, err)
	}
}

// state reads job id's delivery as the Gate does (the merge policy
// review on).
func (f *iterationFixture) state(id string) delivery.State {
	f.t.Helper()
	d, err := f.st.Delivery(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return delivery.State{JobID: d.JobID, Repo: delivery.Repo{Owner: d.Target.Owner, Name: d.Target.Repo}, BaseBranch: d.Target.BaseBranch,
		CandidateSHA: d.CandidateSHA, Branch: d.Branch, PushOver: d.PushOver, Phase: delivery.Phase(d.Phase), PhaseAttempts: d.PhaseAttempts,
		NextAt: d.NextAt, StartedAt: d.StartedAt, CIStartedAt: d.CIStartedAt, PRNumber: d.PRNumber, PRURL: d.PRURL,
		CIState: d.CIState, ETag: d.ETag, MergeSHA: d.MergeSHA, Code: d.FailureCode, Review: true, Requesters: d.Requesters}
}

// drive steps s, saving each state, until it reaches phase or ends.
func (f *iterationFixture) drive(s delivery.State, until delivery.Phase, steps int) delivery.State {
	f.t.Helper()
	for i := 0; i < steps && s.Phase != until && !s.Phase.Terminal(); i++ {
		next := f.step(f.t, s)
		if err := f.st.SaveDelivery(context.Background(), toStore(s), toStore(next), f.clock.Now()); err != nil {
			f.t.Fatalf("save %s -> %s: %v", s.Phase, next.Phase, err)
		}
		s = next
	}
	return s
}

func tokenOf(t *testing.T, tok delivery.Token) *github.Token {
	t.Helper()
	g, ok := tok.Secret.(*github.Token)
	if !ok {
		t.Fatal("not a pkg/github token")
	}
	return g
}

func toStore(s delivery.State) store.Delivery {
	return store.Delivery{JobID: s.JobID, Target: store.DeliveryTarget{Owner: s.Repo.Owner, Repo: s.Repo.Name, BaseBranch: s.BaseBranch},
		CandidateSHA: s.CandidateSHA, Branch: s.Branch, PushOver: s.PushOver, Phase: string(s.Phase), PhaseAttempts: s.PhaseAttempts,
		NextAt: s.NextAt, StartedAt: s.StartedAt, CIStartedAt: s.CIStartedAt, PRNumber: s.PRNumber, PRURL: s.PRURL,
		CIState: s.CIState, ETag: s.ETag, MergeSHA: s.MergeSHA, FailureCode: s.Code}
}

// commit makes a candidate on top of parent in the Gate-side repository,
// under a candidate ref, as a Worker's upload leaves it.
func (f *iterationFixture) commit(parent, content string) string {
	f.t.Helper()
	git := func(args ...string) string {
		out, err := f.apiFixture.git(f.t, f.work, args...)
		if err != nil {
			f.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(out)
	}
	git("checkout", "-q", "--detach", parent)
	if err := os.WriteFile(filepath.Join(f.work, "change.txt"), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	git("commit", "-qam", "follow-up")
	sha := git("rev-parse", "HEAD")
	git("update-ref", "refs/agent-forge/candidates/"+strings.Repeat("c", 32)+"/"+strings.Repeat("d", 32), sha)
	return sha
}

// A review comment with the command on the delivered pull request starts
// a follow-up: its commit goes on the same branch as one more commit,
// CI runs again for it, the approvals of the old head and the requesters'
// approvals do not merge it, a second maintainer's approval of the new
// head does.
func TestReviewCommentFollowupOnTheSameBranch(t *testing.T) {
	d := newDeliveryFixture(t)
	d.api.now = d.clock.Now
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "forge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &iterationFixture{deliveryFixture: d, t: t, st: st, work: d.gh.work}
	ctx := context.Background()
	for _, login := range []string{"alice", "bob", "carol", "dave"} {
		d.api.SetCollaborator("octo", "app", Collaborator{Login: login, Role: RoleWrite})
	}
	issue, _ := d.api.OpenIssue("octo", "app", "erin", "Add a change", "please")
	if _, taken, err := st.SubmitTrigger(ctx, f.job("orig", d.base),
		store.Trigger{RepositoryID: "app", Kind: store.TriggerLabel, EventID: 1, Number: int64(issue), Actor: "alice"}, d.clock.Now()); err != nil || taken {
		t.Fatal(err)
	}
	f.code("orig", d.sha)
	s := f.drive(f.state("orig"), delivery.PhaseReview, 100)
	if s.Phase != delivery.PhaseReview || s.PRNumber == 0 {
		t.Fatalf("first delivery: %+v", s)
	}
	// carol approves the first head; then bob asks for more in a review
	// comment on the diff.
	if _, err := d.api.Review("octo", "app", s.PRNumber, "carol", "APPROVED", d.sha, ""); err != nil {
		t.Fatal(err)
	}
	since := d.clock.Now().Add(-time.Minute)
	if _, err := d.api.ReviewComment("octo", "app", s.PRNumber, "bob", "change.txt", 1, "/forge say it twice"); err != nil {
		t.Fatal(err)
	}
	tok, err := d.gh.App.MintToken(ctx, delivery.Repo{Owner: "octo", Name: "app"}, false)
	if err != nil {
		t.Fatal(err)
	}
	page, err := d.client.ListReviewCommentsSince(ctx, tokenOf(t, tok), "octo", "app", since, 100, "")
	if err != nil || len(page.Items) != 1 || !intake.StartsWithCommand(page.Items[0].Body, "/forge") {
		t.Fatalf("review comments %+v %v", page, err)
	}
	rc := page.Items[0]
	pr, err := d.client.GetPull(ctx, tokenOf(t, tok), "octo", "app", rc.PullNumber)
	if err != nil || pr.HeadSHA != d.sha {
		t.Fatalf("pull %+v %v", pr, err)
	}
	before := f.apiRequests()
	res, err := st.SubmitFollowup(ctx, f.job("f1", pr.HeadSHA),
		store.Trigger{RepositoryID: "app", Kind: store.TriggerReviewComment, EventID: rc.ID, Number: int64(rc.PullNumber), Actor: rc.User.Login},
		store.Followup{Open: pr.Open(), HeadSHA: pr.HeadSHA, MaxFollowups: intake.DefaultMaxFollowups}, d.clock.Now())
	if err != nil || res.Job.ID != "f1" || res.Superseded != "orig" {
		t.Fatalf("follow-up %+v %v", res, err)
	}
	// The superseded delivery's next save is refused: it merges nothing.
	if next := d.step(t, s); !errors.Is(st.SaveDelivery(ctx, toStore(s), toStore(next), d.clock.Now()), store.ErrStale) {
		t.Fatal("the superseded delivery went on")
	}
	cand2 := f.commit(d.sha, "candidate\ncandidate\n")
	f.code("f1", cand2)
	fs := f.state("f1")
	if fs.Branch != "forge/job-orig" || fs.PushOver != d.sha {
		t.Fatalf("follow-up delivery %+v", fs)
	}
	fs = f.drive(fs, delivery.PhaseReview, 200)
	if fs.Phase != delivery.PhaseReview || fs.PRNumber != s.PRNumber || d.pulls() != 1 {
		t.Fatalf("follow-up after CI: %+v, %d pulls", fs, d.pulls())
	}
	if got := d.rev(t, "refs/heads/main"); got != d.base {
		t.Fatalf("merged before an approval: main %s", got)
	}
	// Same branch, one more commit: the new head's parent is the old one.
	if d.rev(t, "refs/heads/forge/job-orig") != cand2 || d.rev(t, "refs/heads/forge/job-orig^") != d.sha {
		t.Fatal("the follow-up is not one more commit on the branch")
	}
	// carol's approval was of the old head; alice (the label) and bob
	// (the review comment) asked for the work: none of them merges it.
	for _, who := range []string{"alice", "bob"} {
		if _, err := d.api.Review("octo", "app", s.PRNumber, who, "APPROVED", cand2, ""); err != nil {
			t.Fatal(err)
		}
	}
	fs = f.drive(fs, delivery.PhaseMerge, 5)
	if fs.Phase != delivery.PhaseReview {
		t.Fatalf("merged on a voided or a requester's approval: %+v", fs)
	}
	if _, err := d.api.Review("octo", "app", s.PRNumber, "dave", "APPROVED", cand2, ""); err != nil {
		t.Fatal(err)
	}
	fs = f.drive(fs, delivery.PhaseMerged, 20)
	if fs.Phase != delivery.PhaseMerged || d.rev(t, "refs/heads/main^2") != cand2 {
		t.Fatalf("approved follow-up: %+v", fs)
	}
	if j, _ := st.Job(ctx, "orig"); j.Status != store.JobFailed || j.FailureCode != store.CodeSuperseded {
		t.Fatalf("first job %+v", j)
	}
	after := f.apiRequests()
	t.Logf("the follow-up's delivery, from its command to the merge (three approvals read): %d API requests that count, %d free 304s",
		after.paid-before.paid, after.free-before.free)
}

type requestCount struct{ paid, free int }

// apiRequests counts the fake API's requests so far: those that spend a
// budget, and the 304s that do not.
func (f *iterationFixture) apiRequests() requestCount {
	f.t.Helper()
	b, err := os.ReadFile(f.logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	var c requestCount
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e LogEntry
		if json.Unmarshal([]byte(line), &e) != nil || e.Host != "api.github.com" {
			continue
		}
		if e.Status == 304 {
			c.free++
		} else {
			c.paid++
		}
	}
	return c
}

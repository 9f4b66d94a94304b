package gate

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// happyGitHub is a delivery.GitHub whose every step succeeds: one branch,
// one pull request, one successful run, one merge. It counts mutations.
type happyGitHub struct {
	mu                      sync.Mutex
	pushes, creates, merges int
	pr                      *delivery.PullRequest
	url                     string    // the html_url CreatePullRequest answers (default canonical)
	body                    string    // of the last pull request created
	reset                   time.Time // the rate-limit reset every runs answer names
	reviews                 []delivery.Review
}

func (h *happyGitHub) MintToken(context.Context, delivery.Repo, bool) (delivery.Token, error) {
	return delivery.Token{Secret: "t", ExpiresAt: time.Now().Add(time.Hour)}, nil
}

func (h *happyGitHub) RunsToken(context.Context, delivery.Repo) (delivery.Token, error) {
	return delivery.Token{ExpiresAt: time.Now().Add(time.Hour)}, nil
}

func (h *happyGitHub) TouchesWorkflows(context.Context, delivery.Repo, string) (bool, error) {
	return false, nil
}

func (h *happyGitHub) CheckCandidate(context.Context, delivery.Repo, string) error { return nil }

func (h *happyGitHub) Push(context.Context, delivery.Token, delivery.Repo, string, string, string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pushes++
	return nil
}

func (h *happyGitHub) FindPullRequest(context.Context, delivery.Token, delivery.Repo, string) (delivery.PullRequest, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pr == nil {
		return delivery.PullRequest{}, false, nil
	}
	return *h.pr, true, nil
}

func (h *happyGitHub) CreatePullRequest(_ context.Context, _ delivery.Token, _ delivery.Repo, p delivery.NewPullRequest) (delivery.PullRequest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.creates++
	h.body = p.Body
	url := h.url
	if url == "" {
		url = "https://github.com/octo/hello/pull/1"
	}
	h.pr = &delivery.PullRequest{Number: 1, URL: url, State: "open",
		HeadSHA: deliverCandidate, HeadRef: p.Head, BaseRef: p.Base}
	return *h.pr, nil
}

func (h *happyGitHub) PullRequest(context.Context, delivery.Token, delivery.Repo, int) (delivery.PullRequest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return *h.pr, nil
}

func (h *happyGitHub) PullRequestIfChanged(ctx context.Context, tok delivery.Token, repo delivery.Repo, n int, _ string) (delivery.PullRequest, string, bool, error) {
	pr, err := h.PullRequest(ctx, tok, repo, n)
	return pr, "", false, err
}

func (h *happyGitHub) Merge(context.Context, delivery.Token, delivery.Repo, int, string) (delivery.MergeResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.merges++
	h.pr.Merged, h.pr.State, h.pr.MergeCommitSHA = true, "closed", deliverMerge
	return delivery.MergeResult{Merged: true, SHA: deliverMerge}, nil
}

// Reviews answers the reviews the test set (h.reviews).
func (h *happyGitHub) Reviews(context.Context, delivery.Token, delivery.Repo, int, string) (delivery.Reviews, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return delivery.Reviews{List: append([]delivery.Review(nil), h.reviews...)}, nil
}

// Permission answers write (the maintain role) for every login.
func (h *happyGitHub) Permission(context.Context, delivery.Token, delivery.Repo, string) (intake.Permission, error) {
	return intake.Permission{Permission: "write", RoleName: "maintain"}, nil
}

func (h *happyGitHub) Merged(context.Context, delivery.Token, delivery.Repo, int) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pr.Merged, nil
}

func (h *happyGitHub) ListRuns(context.Context, delivery.Token, delivery.Repo, string, string) (delivery.Runs, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// 59 requests left for about a minute: the polls keep to
	// poll_interval (1 s).
	if h.reset.IsZero() {
		h.reset = time.Now().Add(time.Minute).Truncate(time.Second)
	}
	return delivery.Runs{TotalCount: 1, Runs: []delivery.Run{{ID: 1, HeadSHA: deliverCandidate, Status: "completed", Conclusion: "success"}},
		Rate: delivery.RateLimit{Limit: 60, Remaining: 59, Reset: h.reset}}, nil
}

const (
	deliverCandidate = "0123456789abcdef0123456789abcdef01234567"
	deliverMerge     = "89abcdef0123456789abcdef0123456789abcdef"
)

// A delivery the previous Gate process left in the store is resumed by
// the next one at start and ends merged.
func TestDeliveryResumesAfterRestart(t *testing.T) {
	key := writeAppKey(t)
	db := filepath.Join(t.TempDir(), "state", "forge.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	// A success needs no_runs_grace and two equal polls (DECISIONS 12):
	// short ones keep the test quick.
	section := deliverySection(key)
	section["no_runs_grace"], section["poll_interval"] = "1s", "1s"
	cfg, sec := testConfig(t, func(m map[string]any) { withDelivery(t, m, section) })
	now := time.Now()
	if _, err := st.Submit(context.Background(), store.NewJob{ID: "j1", Kind: store.KindCoding, Task: []byte(`{}`),
		Pool: "coding", RepositoryID: "agent-forge", Policy: mustRepoPolicy(t, cfg),
		Delivery: &store.DeliveryTarget{Owner: "octo", Repo: "hello", BaseBranch: "main"}}, now); err != nil {
		t.Fatal(err)
	}
	if err := st.ConnectLane(context.Background(), "worker-1", "worker-1", 0, "g1", now); err != nil {
		t.Fatal(err)
	}
	l, err := st.Lease(context.Background(), "worker-1", "g1", "coding", []string{"codex"}, []string{"agent-forge"}, now)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := completeWithCandidate(st, store.Fence{JobID: "j1", AttemptID: l.AttemptID, Lane: "worker-1", Generation: "g1"}, now); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := New(cfg, sec, st, slog.New(slog.NewJSONHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	gh := &happyGitHub{}
	if err := g.EnableDelivery(gh); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	deadline := time.Now().Add(waitLimit)
	for {
		j, err := st.Job(context.Background(), "j1")
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == store.JobSucceeded {
			if d := j.Delivery; d == nil || d.Phase != "merged" || d.MergeSHA != deliverMerge || d.PRURL != "https://github.com/octo/hello/pull/1" || d.CIState != "success" {
				t.Fatalf("delivery %+v", j.Delivery)
			}
			break
		}
		if j.Status != store.JobDelivering || time.Now().After(deadline) {
			t.Fatalf("job %s (%+v)", j.Status, j.Delivery)
		}
		time.Sleep(20 * time.Millisecond)
	}
	gh.mu.Lock()
	if gh.pushes != 1 || gh.creates != 1 || gh.merges != 1 {
		t.Fatalf("pushes %d creates %d merges %d", gh.pushes, gh.creates, gh.merges)
	}
	// The pull request reports what the job's attempt spent, as stored.
	if !strings.Contains(gh.body, "4 requests, 9100 input tokens (8000 cached), 700 output tokens") {
		t.Errorf("pull request body %q", gh.body)
	}
	reset := float64(gh.reset.Unix())
	gh.mu.Unlock()
	// The metrics show this process's part of the delivery and the
	// budget the runs polls read.
	fams := (&testGate{t: t, addr: ln.Addr().String()}).scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"forge_delivery_phases_entered_total", []string{"phase=ci"}, 1},
		{"forge_delivery_phases_entered_total", []string{"phase=merge"}, 1},
		{"forge_deliveries_finished_total", []string{"phase=merged"}, 1},
		{"forge_jobs_finished_total", []string{"status=succeeded"}, 1},
		{"forge_deliveries", []string{"phase=ci"}, 0},
		{"forge_github_rate_limit", []string{"budget=unauthenticated"}, 60},
		{"forge_github_rate_limit_remaining", []string{"budget=unauthenticated"}, 59},
		{"forge_github_rate_limit_reset_timestamp_seconds", []string{"budget=unauthenticated"}, reset},
	} {
		if got := series(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := lookup(fams, "forge_delivery_phases_entered_total", "phase=push"); ok {
		t.Error("the previous process's push counted")
	}
}

func TestEnableDeliveryNeedsTheSection(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	st, err := store.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := New(cfg, sec, st, slog.New(slog.NewJSONHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if g.EnableDelivery(&happyGitHub{}) == nil {
		t.Fatal("delivery enabled without a delivery section")
	}
	if g.deliveryTarget(&cfg.Repositories[0]) != nil {
		t.Fatal("a target without delivery")
	}
}

func mustRepoPolicy(t *testing.T, cfg *Config) []byte {
	t.Helper()
	g, err := New(cfg, &Secrets{}, nil, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return g.repoPolicy["agent-forge"]
}

func TestDeliveryTempDirClearsLeftovers(t *testing.T) {
	root := t.TempDir()
	old := filepath.Join(root, deliveryTempPrefix+"123")
	if err := os.MkdirAll(filepath.Join(old, "push-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(root, "0123.git")
	if err := os.Mkdir(keep, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := deliveryTempDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatal("a killed Gate's mirror directory survived")
	}
	if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(d) != root {
		t.Fatalf("new directory %s: %v", d, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("a bare repository was removed")
	}
}

// A Gate started without the delivery section does not leave a job
// delivering forever: Start ends it with delivery_unconfigured, before
// ready.
func TestDeliveryWithoutTheSectionEndsVisibly(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	st := deliveringJob(t, cfg)
	g, err := New(cfg, sec, st, slog.New(slog.NewJSONHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	j, err := st.Job(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != store.JobFailed || j.Delivery == nil || j.Delivery.Phase != "failed" || j.Delivery.FailureCode != delivery.CodeUnconfigured {
		t.Fatalf("job %s, delivery %+v", j.Status, j.Delivery)
	}
}

// deliveringJob is an in-memory store holding job j1, delivering.
func deliveringJob(t *testing.T, cfg *Config) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if _, err := st.Submit(context.Background(), store.NewJob{ID: "j1", Kind: store.KindCoding, Task: []byte(`{}`),
		Pool: "coding", RepositoryID: "agent-forge", Policy: mustRepoPolicy(t, cfg),
		Delivery: &store.DeliveryTarget{Owner: "octo", Repo: "hello", BaseBranch: "main"}}, now); err != nil {
		t.Fatal(err)
	}
	if err := st.ConnectLane(context.Background(), "worker-1", "worker-1", 0, "g1", now); err != nil {
		t.Fatal(err)
	}
	l, err := st.Lease(context.Background(), "worker-1", "g1", "coding", []string{"codex"}, []string{"agent-forge"}, now)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := completeWithCandidate(st, store.Fence{JobID: "j1", AttemptID: l.AttemptID, Lane: "worker-1", Generation: "g1"}, now); err != nil {
		t.Fatal(err)
	}
	return st
}

// An answer the store cannot keep (here a pull request URL outside the
// stored grammar) ends the delivery github_unavailable instead of
// failing the same save at every pick-up forever.
func TestUnstorableAnswerEndsTheDelivery(t *testing.T) {
	key := writeAppKey(t)
	cfg, sec := testConfig(t, func(m map[string]any) { withDelivery(t, m, deliverySection(key)) })
	st := deliveringJob(t, cfg)
	g, err := New(cfg, sec, st, slog.New(slog.NewJSONHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	gh := &happyGitHub{url: "HTTPS://GITHUB.COM/octo/hello/pull/1"}
	if err := g.EnableDelivery(gh); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	deadline := time.Now().Add(waitLimit)
	for {
		j, err := st.Job(context.Background(), "j1")
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == store.JobFailed {
			if d := j.Delivery; d == nil || d.FailureCode != delivery.CodeUnavailable || d.PRURL != "" {
				t.Fatalf("delivery %+v", j.Delivery)
			}
			break
		}
		if j.Status != store.JobDelivering || time.Now().After(deadline) {
			t.Fatalf("job %s (%+v)", j.Status, j.Delivery)
		}
		time.Sleep(20 * time.Millisecond)
	}
	gh.mu.Lock()
	defer gh.mu.Unlock()
	if gh.merges != 0 {
		t.Fatalf("%d merges", gh.merges)
	}
}

// completeWithCandidate records a successful coding result for the fenced
// attempt the way a Worker's lane does: first the evidence batch that
// created deliverCandidate, then the result naming it.
func completeWithCandidate(st *store.Store, f store.Fence, now time.Time) error {
	recs := []json.RawMessage{json.RawMessage(`{"phase":"candidate_commit"}`)}
	if _, err := st.AddEvidence(context.Background(), f, 1, recs, deliverCandidate, now); err != nil {
		return err
	}
	_, err := st.Complete(context.Background(), f, store.Outcome{Succeeded: true, CandidateSHA: deliverCandidate,
		Usage: &store.Usage{Requests: 4, InputTokens: 9100, OutputTokens: 700, CachedTokens: 8000}}, now)
	return err
}

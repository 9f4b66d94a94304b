package githubfake

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
)

// localPush is delivery.App with the push replaced by a plain local push
// into the served bare repository (the real push needs github.com to
// resolve to the fake: the e2e script's namespace).
type localPush struct {
	*delivery.App
	t      *testing.T
	f      *apiFixture
	work   string
	pushes int
}

func (l *localPush) Push(ctx context.Context, tok delivery.Token, repo delivery.Repo, branch, sha, over string) error {
	l.pushes++
	bare := filepath.Join(l.f.root, repo.Owner, repo.Name+".git")
	if _, err := l.f.git(l.t, l.work, "push", "-q", bare, sha+":refs/heads/"+branch); err != nil {
		return &delivery.Error{Kind: delivery.KindPushRejected}
	}
	// What the fake's git side tells the API after a push over HTTPS.
	l.f.api.onPush(repo.Owner, repo.Name, map[string]string{branch: sha})
	return nil
}

// virtualClock advances only through Sleep.
type virtualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *virtualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *virtualClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

type deliveryFixture struct {
	*apiFixture
	gh        *localPush
	m         *delivery.Machine
	clock     *virtualClock
	base, sha string
	logs      *bytes.Buffer // the App's log (nil: none)
}

func newDeliveryFixture(t *testing.T) *deliveryFixture {
	return newDeliveryFixtureWith(t, basePerms, "change.txt")
}

// newDeliveryFixtureWith serves an installation holding perms and a
// candidate that adds the file path.
func newDeliveryFixtureWith(t *testing.T, perms map[string]string, path string) *deliveryFixture {
	return newDeliveryFixtureContent(t, perms, path, []byte("candidate\n"))
}

// newDeliveryFixtureContent is newDeliveryFixtureWith with the added
// file's content.
func newDeliveryFixtureContent(t *testing.T, perms map[string]string, path string, content []byte) *deliveryFixture {
	return newDeliveryFixtureContentOn(t, newAPIFixture(t, perms), path, content)
}

// newDeliveryFixtureContentOn is newDeliveryFixtureContent on the API
// fixture a.
func newDeliveryFixtureContentOn(t *testing.T, a *apiFixture, path string, content []byte) *deliveryFixture {
	t.Helper()
	base := a.seed(t, "octo/app")
	work := t.TempDir()
	mustGit := func(args ...string) string {
		out, err := a.git(t, work, args...)
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(out)
	}
	mustGit("clone", "-q", filepath.Join(a.root, "octo", "app.git"), ".")
	if err := os.MkdirAll(filepath.Dir(filepath.Join(work, path)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, path), content, 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit("add", path)
	mustGit("commit", "-q", "-m", "candidate")
	sha := mustGit("rev-parse", "HEAD")
	clock := &virtualClock{t: time.Now()}
	mustGit("update-ref", "refs/agent-forge/candidates/"+strings.Repeat("a", 32)+"/"+strings.Repeat("b", 32), sha)
	app := &delivery.App{API: a.client, AppID: "12345", Key: a.key, Now: time.Now, Git: gitPath(t), TempDir: t.TempDir(),
		Local: func(delivery.Repo) (delivery.LocalRepo, bool) {
			return delivery.LocalRepo{Dir: filepath.Join(work, ".git"), DefaultBranch: "main", GitTimeout: time.Minute}, true
		}}
	gh := &localPush{App: app, t: t, f: a, work: work}
	m, err := delivery.NewMachine(gh, delivery.Config{MaxAttempts: 3, RetryBase: time.Second, PollInterval: 10 * time.Second,
		NoRunsGrace: 2 * time.Minute, Timeout: 30 * time.Minute}, clock)
	if err != nil {
		t.Fatal(err)
	}
	return &deliveryFixture{apiFixture: a, gh: gh, m: m, clock: clock, base: base, sha: sha}
}

func (d *deliveryFixture) run(t *testing.T) delivery.State {
	t.Helper()
	s := delivery.New("j1", delivery.Repo{Owner: "octo", Name: "app"}, "main", d.sha, d.clock.Now())
	for i := 0; i < 200 && !s.Phase.Terminal(); i++ {
		if w := s.NextAt.Sub(d.clock.Now()); w > 0 {
			d.clock.Sleep(context.Background(), w)
		}
		next, err := d.m.Step(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		s = next
	}
	if !s.Phase.Terminal() {
		t.Fatalf("not terminal: %+v", s)
	}
	return s
}

func (d *deliveryFixture) rev(t *testing.T, expr string) string {
	t.Helper()
	out, err := d.git(t, "", "--git-dir="+filepath.Join(d.root, "octo", "app.git"), "rev-parse", "--verify", "--quiet", expr)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func (d *deliveryFixture) pulls() int {
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	return len(d.api.pulls[repoKey("octo", "app")])
}

func TestDeliveryAgainstTheFake(t *testing.T) {
	t.Run("merged", func(t *testing.T) {
		d := newDeliveryFixture(t)
		s := d.run(t)
		if s.Phase != delivery.PhaseMerged || s.MergeSHA == "" || s.MergeSHA != d.rev(t, "refs/heads/main") {
			t.Fatalf("%+v; main at %s", s, d.rev(t, "refs/heads/main"))
		}
		if d.rev(t, "refs/heads/main^1") != d.base || d.rev(t, "refs/heads/main^2") != d.sha || d.pulls() != 1 {
			t.Fatalf("merge parents %s %s, %d pulls", d.rev(t, "refs/heads/main^1"), d.rev(t, "refs/heads/main^2"), d.pulls())
		}
		if s.PRURL != "https://github.com/octo/app/pull/1" || s.CIState != delivery.CISuccess {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("ci failure", func(t *testing.T) {
		d := newDeliveryFixture(t)
		d.api.SetCI("octo", "app", CIFailure)
		s := d.run(t)
		if s.Code != delivery.CodeCIFailed || d.rev(t, "refs/heads/main") != d.base || d.pulls() != 1 {
			t.Fatalf("%+v", s)
		}
		d.api.mu.Lock()
		open := d.api.pulls[repoKey("octo", "app")][0].State == "open"
		d.api.mu.Unlock()
		if !open {
			t.Fatal("pull request not left open")
		}
	})
	t.Run("no runs", func(t *testing.T) {
		d := newDeliveryFixture(t)
		d.api.SetCI("octo", "app", CINone)
		if s := d.run(t); s.Code != delivery.CodeCINoRuns || d.rev(t, "refs/heads/main") != d.base {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("lost pull request creation", func(t *testing.T) {
		d := newDeliveryFixture(t)
		d.api.SetAPIFault(APIFaultLosePRCreate, 1)
		if s := d.run(t); s.Phase != delivery.PhaseMerged || d.pulls() != 1 {
			t.Fatalf("%+v, %d pulls", s, d.pulls())
		}
	})
	t.Run("lost merge answer", func(t *testing.T) {
		d := newDeliveryFixture(t)
		d.api.SetDeliveryFault(DeliveryFaultLoseMerge, 1)
		s := d.run(t)
		if s.Phase != delivery.PhaseMerged || s.MergeSHA != d.rev(t, "refs/heads/main") || d.rev(t, "refs/heads/main^2") != d.sha {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("not mergeable", func(t *testing.T) {
		d := newDeliveryFixture(t)
		d.api.SetDeliveryFault(DeliveryFaultNotMergeable, 1)
		if s := d.run(t); s.Code != delivery.CodeMergeRefused || d.rev(t, "refs/heads/main") != d.base {
			t.Fatalf("%+v", s)
		}
	})
}

func TestRunsListConditionalAndLimited(t *testing.T) {
	d := newDeliveryFixture(t)
	ctx := context.Background()
	p, err := d.client.ListRuns(ctx, nil, "octo", "app", d.sha, "")
	if err != nil || p.TotalCount != 0 || p.Rate.Limit != unauthLimit || p.Rate.Remaining != unauthLimit-1 || p.ETag == "" {
		t.Fatalf("%+v %v", p, err)
	}
	again, err := d.client.ListRuns(ctx, nil, "octo", "app", d.sha, p.ETag)
	// Unauthenticated, a 304 still counts (GitHub frees only authorized
	// conditional requests).
	if err != nil || !again.NotModified || again.Rate.Remaining != unauthLimit-2 {
		t.Fatalf("conditional: %+v %v", again, err)
	}
	for i := 0; i < unauthLimit-1; i++ {
		_, err = d.client.ListRuns(ctx, nil, "octo", "app", d.sha, "")
	}
	if err == nil || !strings.Contains(err.Error(), "rate_limited") {
		t.Fatalf("61st request: %v", err)
	}
}

func gitPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	return p
}

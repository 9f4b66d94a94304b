package githubfake

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
)

// scaledClock is GitHub's time running timeScale times faster than the
// wall clock: every duration of the machine, the client and the fake
// (poll_interval, the rate-limit window, token lifetimes, the workflow)
// keeps its ratio to the others.
type scaledClock struct {
	start, epoch time.Time
	k            time.Duration
}

func (c *scaledClock) Now() time.Time { return c.epoch.Add(time.Since(c.start) * c.k) }

func (c *scaledClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d / c.k)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Benchmark figures (docs/performance.md).
const (
	benchJobs     = 50
	benchWorkflow = 2 * time.Minute
)

// BenchmarkDeliveriesPerHour: 50 concurrent deliveries, back to back, of a
// repository whose one pull_request workflow starts 10 s after the pull
// request and runs 2 minutes, through the production delivery machine and
// pkg/github client against the fake with GitHub's rate limits (60 an
// hour unauthenticated, 5,000 an hour per installation, 304 free only
// when authorized), during one hour of GitHub's time scaled 50 times
// (72 s; BENCH_DELIVERY_SCALE changes it). Without and with actions:
// read (DECISIONS 16). It reports the
// deliveries merged in that hour and fails if any request went past its
// announced budget. The two modes alternate for BENCH_DELIVERY_ROUNDS
// rounds (default 3; the medians are reported). Run with -benchtime=1x.
func BenchmarkDeliveriesPerHour(b *testing.B) {
	modes := []struct {
		name  string
		perms map[string]string
	}{
		{"unauthenticated", basePerms},
		{"actions_read", map[string]string{"contents": "write", "pull_requests": "write", "metadata": "read", "actions": "read"}},
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("BENCH_DELIVERY_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for i := 0; i < b.N; i++ {
		// Alternated rounds; the medians are reported.
		got := make([][]float64, len(modes))
		per := make([][]float64, len(modes))
		for r := 0; r < rounds; r++ {
			for k, mode := range modes {
				merged, paid, over := deliveriesInAnHour(b, mode.perms)
				if over != 0 {
					b.Fatalf("%s: %d requests past their announced budget", mode.name, over)
				}
				b.Logf("round %d %s: %d deliveries in the hour, %d counted requests", r+1, mode.name, merged, paid)
				got[k] = append(got[k], float64(merged))
				per[k] = append(per[k], float64(paid)/float64(max(merged, 1)))
			}
		}
		for k, mode := range modes {
			b.ReportMetric(median(got[k]), mode.name+"-deliveries/hour")
			b.ReportMetric(median(per[k]), mode.name+"-counted-requests/delivery")
		}
	}
}

// timeScale is how much faster GitHub's time runs: BENCH_DELIVERY_SCALE,
// default 50 (the hour in 72 s).
func timeScale() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("BENCH_DELIVERY_SCALE")); err == nil && v > 0 && v <= 3600 {
		return time.Duration(v)
	}
	return 50
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func deliveriesInAnHour(b *testing.B, perms map[string]string) (merged, paid, over int) {
	a := newAPIFixture(b, perms)
	clock := &scaledClock{start: time.Now(), epoch: time.Now(), k: timeScale()}
	a.api.now = clock.Now
	a.client = github.New(a.tr, clock.Now, github.Options{Sleep: clock.Sleep})
	a.seed(b, "octo/app")
	if err := a.api.SetWorkflows("octo", "app", []Workflow{
		{Name: "test", Event: "pull_request", Start: 10 * time.Second, Duration: benchWorkflow, Conclusion: "success"}}); err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	if out, err := a.git(b, work, "clone", "-q", filepath.Join(a.root, "octo", "app.git"), "."); err != nil {
		b.Fatalf("clone: %v %s", err, out)
	}
	const candidates = 1500
	shas := makeCandidates(b, work, candidates)
	gh := &benchPush{root: a.root, work: work, api: a.api}
	gh.App = &delivery.App{API: a.client, AppID: "12345", Key: a.key, Now: clock.Now, Git: gitPathB(b), TempDir: b.TempDir(),
		Local: func(delivery.Repo) (delivery.LocalRepo, bool) {
			return delivery.LocalRepo{Dir: filepath.Join(work, ".git"), DefaultBranch: "main", GitTimeout: time.Minute}, true
		}}
	m, err := delivery.NewMachine(gh, delivery.Config{MaxAttempts: 5, RetryBase: 5 * time.Second, PollInterval: 10 * time.Second,
		NoRunsGrace: 2 * time.Minute, Timeout: 45 * time.Minute}, clock)
	if err != nil {
		b.Fatal(err)
	}
	end := clock.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour/clock.k))
	defer cancel()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < benchJobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= candidates {
					return
				}
				s := delivery.New(fmt.Sprintf("%032x", i), delivery.Repo{Owner: "octo", Name: "app"}, "main", shas[i], clock.Now())
				for !s.Phase.Terminal() {
					if d := s.NextAt.Sub(clock.Now()); d > 0 && clock.Sleep(ctx, d) != nil {
						return
					}
					n, err := m.Step(ctx, s)
					if err != nil {
						return
					}
					s = n
				}
				if s.Phase == delivery.PhaseMerged && clock.Now().Before(end) {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	a.api.mu.Lock()
	for name, bu := range a.api.budgets {
		if name != budgetApp {
			paid += bu.used
		}
	}
	a.api.mu.Unlock()
	return int(done.Load()), paid, a.api.OverLimit()
}

// benchPush is delivery.App with the push replaced by a local push into
// the served repository (the real one needs github.com to be the fake).
type benchPush struct {
	*delivery.App
	root, work string
	api        *API
	mu         sync.Mutex
}

func (p *benchPush) Push(ctx context.Context, tok delivery.Token, repo delivery.Repo, branch, sha, over string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command("git", "push", "-q", filepath.Join(p.root, repo.Owner, repo.Name+".git"), sha+":refs/heads/"+branch)
	cmd.Dir = p.work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + p.work}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("push: %v %s", err, out)
	}
	p.api.onPush(repo.Owner, repo.Name, map[string]string{branch: sha})
	return nil
}

// makeCandidates writes n candidate commits on main of the clone work,
// each adding its own file, pinned at candidate refs, with fast-import.
func makeCandidates(b *testing.B, work string, n int) []string {
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "commit refs/agent-forge/candidates/%032x/%032x\nmark :%d\ncommitter t <t@example.invalid> 1700000000 +0000\ndata 1\nc\nfrom refs/heads/main^0\nM 100644 inline job-%d.txt\ndata 2\n%d\n\n",
			i, 1, i+1, i, i%10)
	}
	cmd := exec.Command("git", "fast-import", "--quiet", "--export-marks=marks")
	cmd.Dir = work
	cmd.Stdin = strings.NewReader(in.String())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + work}
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("fast-import: %v %s", err, out)
	}
	marks, err := os.ReadFile(filepath.Join(work, "marks"))
	if err != nil {
		b.Fatal(err)
	}
	shas := make([]string, n)
	for _, line := range strings.Split(strings.TrimSpace(string(marks)), "\n") {
		var mark int
		var sha string
		if _, err := fmt.Sscanf(line, ":%d %s", &mark, &sha); err == nil && mark >= 1 && mark <= n {
			shas[mark-1] = sha
		}
	}
	return shas
}

func gitPathB(b *testing.B) string {
	p, err := exec.LookPath("git")
	if err != nil {
		b.Fatal("git is required")
	}
	return p
}

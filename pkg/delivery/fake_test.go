package delivery

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/intake"
)

// fakeClock advances only through Sleep and Advance.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// fakeGitHub is an in-memory repository host. fail* hooks inject errors;
// lose* hooks perform the action and then report a transient failure (a
// lost answer).
type fakeGitHub struct {
	t     *testing.T
	clock *fakeClock
	mu    sync.Mutex

	branches map[string]string // branch -> sha
	reviews  []Review
	perms    map[string]intake.Permission // collaborator permissions by login
	secret   error                        // CheckCandidate's answer
	prs      []PullRequest
	bodies   []string // of the pull requests created, in order
	runs     []Run
	etag     int
	base     string // base branch head
	merges   int    // successful merges
	mergeReq int    // merge requests received
	mints    int
	tokenTTL time.Duration
	calls    []string

	failMint, failPush, failFind, failCreate, failRuns, failMerge, failMerged func() error
	loseCreate, loseMerge                                                     bool
	lastIfNoneMatch                                                           string
	rate                                                                      RateLimit
	// touches: the candidate changes .github/workflows; wfGranted: the
	// installation holds workflows write; actionsRead: it grants actions
	// read (runs are read with a token then).
	touches, wfGranted, actionsRead bool
	// mintedWF: the workflows flag of every token minted, by value;
	// runsAuth: whether each runs read carried a token.
	mintedWF map[string]bool
	runsAuth []bool
	// notMerged: merges answer merged=false; mergedBehind: the next merge
	// is carried out but answered as refused (the PR is merged).
	notMerged, mergedBehind bool
	// spend: every runs read spends one of rate.Remaining (refused, and
	// counted in overBudget, once none remains).
	spend      bool
	overBudget int
	// issued tokens by value, for the expiry check
	issued map[string]time.Time
}

func newFake(t *testing.T, clock *fakeClock) *fakeGitHub {
	return &fakeGitHub{t: t, clock: clock, branches: map[string]string{}, base: "b0", tokenTTL: time.Hour,
		issued: map[string]time.Time{}, mintedWF: map[string]bool{}}
}

func (f *fakeGitHub) use(tok Token, op string) {
	f.calls = append(f.calls, op)
	v, _ := tok.Secret.(string)
	exp, ok := f.issued[v]
	if !ok {
		f.t.Errorf("%s with a token never minted", op)
		return
	}
	if !f.clock.Now().Before(exp) {
		f.t.Errorf("%s with a token past its expires_at", op)
	}
	if f.touches && op != "runs-auth" && !f.mintedWF[v] {
		f.t.Errorf("%s of a workflow-changing candidate with a token without workflows write", op)
	}
}

func (f *fakeGitHub) MintToken(ctx context.Context, repo Repo, workflows bool) (Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failMint != nil {
		if err := f.failMint(); err != nil {
			return Token{}, err
		}
	}
	if workflows && !f.wfGranted {
		return Token{}, &Error{Kind: KindWorkflowPermission}
	}
	f.mints++
	v := "ghs_fake" + strconv.Itoa(f.mints)
	tok := Token{Secret: v, ExpiresAt: f.clock.Now().Add(f.tokenTTL), Budget: "installation:1"}
	f.issued[v] = tok.ExpiresAt
	f.mintedWF[v] = workflows
	return tok, nil
}

func (f *fakeGitHub) RunsToken(ctx context.Context, repo Repo) (Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.actionsRead {
		return Token{ExpiresAt: f.clock.Now().Add(time.Hour)}, nil
	}
	f.mints++
	v := "ghs_runs" + strconv.Itoa(f.mints)
	tok := Token{Secret: v, ExpiresAt: f.clock.Now().Add(f.tokenTTL), Budget: "installation:1"}
	f.issued[v] = tok.ExpiresAt
	return tok, nil
}

func (f *fakeGitHub) TouchesWorkflows(ctx context.Context, repo Repo, sha string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "touches")
	return f.touches, nil
}

// wfToken reports whether the token tok was minted with workflows write.
func (f *fakeGitHub) wfToken(tok Token) bool {
	v, _ := tok.Secret.(string)
	return f.mintedWF[v]
}

// CheckCandidate answers secret (nil: the candidate holds none); it is
// not a call GitHub sees.
func (f *fakeGitHub) CheckCandidate(ctx context.Context, repo Repo, sha string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.secret
}

func (f *fakeGitHub) Push(ctx context.Context, tok Token, repo Repo, branch, sha, over string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "push")
	if f.failPush != nil {
		if err := f.failPush(); err != nil {
			return err
		}
	}
	cur, ok := f.branches[branch]
	switch {
	case ok && cur == sha:
		return nil
	case over == "" && ok:
		return &Error{Kind: KindPushRejected}
	case over != "" && cur != over:
		return &Error{Kind: KindBaseMoved}
	}
	f.branches[branch] = sha
	// GitHub moves an open pull request's head with its branch.
	for i := range f.prs {
		if f.prs[i].HeadRef == branch && f.prs[i].State == "open" {
			f.prs[i].HeadSHA = sha
		}
	}
	return nil
}

func (f *fakeGitHub) FindPullRequest(ctx context.Context, tok Token, repo Repo, branch string) (PullRequest, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "find")
	if f.failFind != nil {
		if err := f.failFind(); err != nil {
			return PullRequest{}, false, err
		}
	}
	for _, pr := range f.prs {
		if pr.HeadRef == branch {
			return pr, true, nil
		}
	}
	return PullRequest{}, false, nil
}

func (f *fakeGitHub) CreatePullRequest(ctx context.Context, tok Token, repo Repo, p NewPullRequest) (PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "create")
	if f.failCreate != nil {
		if err := f.failCreate(); err != nil {
			return PullRequest{}, err
		}
	}
	for _, pr := range f.prs {
		if pr.HeadRef == p.Head && pr.State == "open" {
			return PullRequest{}, &Error{Kind: KindPRExists}
		}
	}
	sha, ok := f.branches[p.Head]
	if !ok {
		return PullRequest{}, &Error{Kind: KindNotFound}
	}
	n := len(f.prs) + 1
	pr := PullRequest{Number: n, URL: fmt.Sprintf("https://github.com/o/r/pull/%d", n), State: "open",
		HeadSHA: sha, HeadRef: p.Head, BaseRef: p.Base}
	f.prs = append(f.prs, pr)
	f.bodies = append(f.bodies, p.Body)
	if f.loseCreate {
		f.loseCreate = false
		return PullRequest{}, &Error{Kind: KindTransient}
	}
	return pr, nil
}

func (f *fakeGitHub) PullRequest(ctx context.Context, tok Token, repo Repo, n int) (PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "get")
	if n < 1 || n > len(f.prs) {
		return PullRequest{}, &Error{Kind: KindNotFound}
	}
	return f.prs[n-1], nil
}

func (f *fakeGitHub) PullRequestIfChanged(ctx context.Context, tok Token, repo Repo, n int, etag string) (PullRequest, string, bool, error) {
	pr, err := f.PullRequest(ctx, tok, repo, n)
	if err != nil {
		return PullRequest{}, "", false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	tag := fmt.Sprintf("%q", fmt.Sprint(pr))
	if etag == tag {
		f.calls = append(f.calls, "get-304")
		return PullRequest{}, tag, true, nil
	}
	return pr, tag, false, nil
}

func (f *fakeGitHub) Merge(ctx context.Context, tok Token, repo Repo, n int, sha string) (MergeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "merge")
	f.mergeReq++
	if f.failMerge != nil {
		if err := f.failMerge(); err != nil {
			return MergeResult{}, err
		}
	}
	pr := &f.prs[n-1]
	if pr.Merged {
		return MergeResult{}, &Error{Kind: KindNotMergeable}
	}
	if f.notMerged {
		return MergeResult{Merged: false}, nil
	}
	if pr.HeadSHA != sha {
		return MergeResult{}, &Error{Kind: KindHeadMoved}
	}
	f.merges++
	f.base = "m" + strconv.Itoa(f.merges)
	pr.Merged, pr.State, pr.MergeCommitSHA = true, "closed", f.base
	if f.loseMerge {
		f.loseMerge = false
		return MergeResult{}, &Error{Kind: KindTransient}
	}
	if f.mergedBehind {
		f.mergedBehind = false
		return MergeResult{}, &Error{Kind: KindNotMergeable}
	}
	return MergeResult{Merged: true, SHA: f.base}, nil
}

// Reviews answers the reviews set by the test; an unchanged list is a
// 304 to its last ETag.
func (f *fakeGitHub) Reviews(ctx context.Context, tok Token, repo Repo, n int, etag string) (Reviews, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "reviews")
	tag := fmt.Sprintf("%q", fmt.Sprint(f.reviews))
	if etag == tag {
		f.calls = append(f.calls, "reviews-304")
		return Reviews{NotModified: true, ETag: etag}, nil
	}
	return Reviews{ETag: tag, List: append([]Review(nil), f.reviews...)}, nil
}

// Permission answers perms[login], none when absent.
func (f *fakeGitHub) Permission(ctx context.Context, tok Token, repo Repo, login string) (intake.Permission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "permission")
	if p, ok := f.perms[login]; ok {
		return p, nil
	}
	return intake.Permission{Permission: "none", RoleName: "none"}, nil
}

func (f *fakeGitHub) Merged(ctx context.Context, tok Token, repo Repo, n int) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use(tok, "merged")
	if f.failMerged != nil {
		if err := f.failMerged(); err != nil {
			return false, err
		}
	}
	return n >= 1 && n <= len(f.prs) && f.prs[n-1].Merged, nil
}

func (f *fakeGitHub) ListRuns(ctx context.Context, tok Token, repo Repo, headSHA, etag string) (Runs, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "runs")
	f.runsAuth = append(f.runsAuth, tok.Authenticated())
	if tok.Authenticated() {
		f.use(tok, "runs-auth")
	}
	f.lastIfNoneMatch = etag
	if f.failRuns != nil {
		if err := f.failRuns(); err != nil {
			return Runs{}, err
		}
	}
	if f.spend {
		if f.rate.Remaining == 0 {
			f.overBudget++
			return Runs{}, &Error{Kind: KindRateLimited, RetryAt: f.rate.Reset}
		}
		f.rate.Remaining--
	}
	tag := `"e` + strconv.Itoa(f.etag) + `"`
	if etag == tag {
		return Runs{NotModified: true, ETag: tag, Rate: f.rate}, nil
	}
	var out []Run
	for _, r := range f.runs {
		if r.HeadSHA == headSHA {
			out = append(out, r)
		}
	}
	return Runs{ETag: tag, TotalCount: len(out), Runs: out, Rate: f.rate}, nil
}

// setRuns replaces the runs (a new ETag).
func (f *fakeGitHub) setRuns(runs ...Run) {
	f.mu.Lock()
	f.runs = runs
	f.etag++
	f.mu.Unlock()
}

func (f *fakeGitHub) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == op {
			n++
		}
	}
	return n
}

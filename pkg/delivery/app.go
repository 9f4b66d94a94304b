package delivery

import (
	"context"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
)

var _ GitHub = (*App)(nil)

// candidateRefs is where Workers keep candidates in a repository.
const candidateRefs = "refs/agent-forge/candidates/"

// App is GitHub as delivery sees it through pkg/github: the App's
// identity for installation tokens, the REST client, and git for the push
// from the local bare repository that holds the candidate.
type App struct {
	API   *github.Client
	AppID string
	Key   *rsa.PrivateKey
	Now   func() time.Time
	// Git is the git executable; GitTimeout and GitOutputBytes bound each
	// command.
	Git            string
	GitTimeout     time.Duration
	GitOutputBytes int64
	// TempDir is a private directory where each push makes (and removes)
	// its own mirror and git home.
	TempDir string
	// Local returns the local bare repository holding repo's candidates.
	Local func(repo Repo) (string, bool)
}

// mint asks for an installation token for repo with exactly perms. The
// client signs a fresh App JWT for every request it sends, so waiting out
// GitHub's limits can never outlast the JWT.
func (a *App) mint(ctx context.Context, repo Repo, perms github.Permissions) (*github.Token, error) {
	app := github.App{ID: a.AppID, Key: a.Key}
	inst, err := a.API.InstallationAs(ctx, app, repo.Owner, repo.Name)
	if err != nil {
		if github.IsClass(err, github.ClassNotFound) {
			return nil, &Error{Kind: KindNotInstalled}
		}
		return nil, a.classify(err)
	}
	tok, err := a.API.CreateTokenAs(ctx, app, inst.ID, repo.Name, perms)
	if err != nil {
		if errors.Is(err, github.ErrPermissionsMismatch) || github.IsClass(err, github.ClassValidation) {
			return nil, &Error{Kind: KindPermission}
		}
		return nil, a.classify(err)
	}
	return tok, nil
}

// MintToken mints a token for repo with contents and pull_requests write.
func (a *App) MintToken(ctx context.Context, repo Repo) (Token, error) {
	tok, err := a.mint(ctx, repo, github.DerivePermissions(nil))
	if err != nil {
		return Token{}, err
	}
	return Token{Secret: tok, ExpiresAt: tok.ExpiresAt}, nil
}

func secret(t Token) (*github.Token, error) {
	g, ok := t.Secret.(*github.Token)
	if !ok || g == nil {
		return nil, &Error{Kind: KindTransient}
	}
	return g, nil
}

// classify maps a pkg/github failure to a Kind for calls without a more
// specific meaning.
func (a *App) classify(err error) error {
	var e *github.APIError
	if !errors.As(err, &e) {
		return &Error{Kind: KindTransient}
	}
	switch e.Class {
	case github.ClassRateLimited:
		out := &Error{Kind: KindRateLimited}
		if e.RetryAfter > 0 {
			out.RetryAt = a.Now().Add(e.RetryAfter)
		}
		return out
	case github.ClassUnauthorized:
		// An installation token refused before its expiry (revoked, the
		// installation changed), or the App's JWT: retried with a fresh
		// token, permission_denied once max_attempts are spent.
		return &Error{Kind: KindTokenRejected}
	case github.ClassPermission, github.ClassForbidden:
		return &Error{Kind: KindPermission}
	case github.ClassNotFound:
		return &Error{Kind: KindNotFound}
	}
	return &Error{Kind: KindTransient}
}

// Push copies the candidate from the local repository into a fresh
// mirror and creates the branch at it; the branch already at the
// candidate is success. A candidate touching .github/workflows is pushed
// with its own token that adds workflows write, revoked afterwards.
func (a *App) Push(ctx context.Context, tok Token, repo Repo, branch, sha string) error {
	gt, err := secret(tok)
	if err != nil {
		return err
	}
	local, ok := a.Local(repo)
	if !ok {
		return &Error{Kind: KindNotFound}
	}
	tmp, err := os.MkdirTemp(a.TempDir, "push-")
	if err != nil {
		return &Error{Kind: KindTransient}
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	if os.Mkdir(home, 0o700) != nil {
		return &Error{Kind: KindTransient}
	}
	git := &gitx.Runner{Git: a.Git, Home: home, Timeout: a.GitTimeout, OutputBytes: a.GitOutputBytes}
	ref, err := candidateRef(ctx, git, local, sha)
	if err != nil {
		return err
	}
	m, err := github.NewMirror(ctx, git, filepath.Join(tmp, "candidate.git"))
	if err != nil {
		return &Error{Kind: KindTransient}
	}
	if err := m.Copy(ctx, local, ref); err != nil {
		return &Error{Kind: KindTransient}
	}
	c, err := github.ReadCommit(ctx, git, m.Dir, sha)
	if err != nil || len(c.Parents) != 1 {
		return &Error{Kind: KindPushRejected}
	}
	remote, exists, err := m.RemoteBranch(ctx, gt, repo.Owner, repo.Name, branch)
	switch {
	case err != nil:
		return &Error{Kind: KindTransient}
	case exists && remote == sha:
		return nil
	case exists:
		return &Error{Kind: KindPushRejected}
	}
	pushTok := gt
	changed, err := m.ChangedPaths(ctx, c.Parents[0], sha)
	if err != nil {
		return &Error{Kind: KindTransient}
	}
	if perms := github.DerivePermissions(changed); len(perms) > len(github.DerivePermissions(nil)) {
		wt, err := a.mint(ctx, repo, perms)
		if err != nil {
			if e := (*Error)(nil); errors.As(err, &e) && e.Kind == KindPermission {
				return &Error{Kind: KindWorkflowPermission}
			}
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			a.API.Revoke(rctx, wt)
			cancel()
		}()
		pushTok = wt
	}
	switch err := m.PushNew(ctx, pushTok, repo.Owner, repo.Name, branch, sha); {
	case err == nil:
		return nil
	case errors.Is(err, github.ErrWorkflowsRefused):
		return &Error{Kind: KindWorkflowPermission}
	case errors.Is(err, github.ErrBranchConflict):
		remote, exists, rerr := m.RemoteBranch(ctx, gt, repo.Owner, repo.Name, branch)
		if rerr == nil && exists && remote == sha {
			return nil
		}
		return &Error{Kind: KindPushRejected}
	}
	return &Error{Kind: KindTransient}
}

// candidateRef finds the Worker's candidate ref pointing at sha in the
// local repository.
func candidateRef(ctx context.Context, git *gitx.Runner, local, sha string) (string, error) {
	out, err := git.Run(ctx, gitx.Cmd{GitDir: local, Args: []string{"for-each-ref", "--format=%(refname)",
		"--points-at=" + sha, "--", candidateRefs}})
	if err != nil {
		return "", &Error{Kind: KindTransient}
	}
	for _, ref := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ident.ValidCandidateRef(ref) {
			return ref, nil
		}
	}
	return "", &Error{Kind: KindPushRejected}
}

// FindPullRequest returns the branch's pull request: a merged one first,
// then an open one, then any.
func (a *App) FindPullRequest(ctx context.Context, tok Token, repo Repo, branch string) (PullRequest, bool, error) {
	gt, err := secret(tok)
	if err != nil {
		return PullRequest{}, false, err
	}
	prs, err := a.API.PullsForBranch(ctx, gt, repo.Owner, repo.Name, branch)
	if err != nil {
		return PullRequest{}, false, a.classify(err)
	}
	best := -1
	for i, p := range prs {
		if best < 0 || (p.Merged && !prs[best].Merged) || (p.Open() && !prs[best].Open() && !prs[best].Merged) {
			best = i
		}
	}
	if best < 0 {
		return PullRequest{}, false, nil
	}
	return pull(prs[best]), true, nil
}

func pull(p github.PullRequest) PullRequest {
	return PullRequest{Number: p.Number, URL: p.URL, State: p.State, Merged: p.Merged, MergeCommitSHA: p.MergeCommitSHA,
		HeadSHA: p.HeadSHA, HeadRef: p.HeadRef, BaseRef: p.BaseRef}
}

// CreatePullRequest opens the pull request (never retried by pkg/github
// after an uncertain outcome; the machine looks again).
func (a *App) CreatePullRequest(ctx context.Context, tok Token, repo Repo, p NewPullRequest) (PullRequest, error) {
	gt, err := secret(tok)
	if err != nil {
		return PullRequest{}, err
	}
	pr, err := a.API.CreatePull(ctx, gt, repo.Owner, repo.Name, p.Head, p.Base, p.Title, p.Body)
	if err != nil {
		var e *github.APIError
		switch {
		case github.PRExists(err):
			return PullRequest{}, &Error{Kind: KindPRExists}
		case errors.As(err, &e) && e.Class == github.ClassValidation:
			return PullRequest{}, &Error{Kind: KindNoCommits}
		}
		return PullRequest{}, a.classify(err)
	}
	return pull(*pr), nil
}

// PullRequest reads pull request n.
func (a *App) PullRequest(ctx context.Context, tok Token, repo Repo, n int) (PullRequest, error) {
	gt, err := secret(tok)
	if err != nil {
		return PullRequest{}, err
	}
	pr, err := a.API.GetPull(ctx, gt, repo.Owner, repo.Name, n)
	if err != nil {
		return PullRequest{}, a.classify(err)
	}
	return pull(*pr), nil
}

// Merge merges pull request n at exactly sha. 409 is KindHeadMoved;
// 405 and 422 are KindNotMergeable (final).
func (a *App) Merge(ctx context.Context, tok Token, repo Repo, n int, sha string) (MergeResult, error) {
	gt, err := secret(tok)
	if err != nil {
		return MergeResult{}, err
	}
	merged, err := a.API.Merge(ctx, gt, repo.Owner, repo.Name, n, sha)
	if err != nil {
		var e *github.APIError
		switch {
		case errors.As(err, &e) && e.Class == github.ClassConflict:
			return MergeResult{}, &Error{Kind: KindHeadMoved}
		case errors.As(err, &e) && (e.Status == 405 || e.Class == github.ClassValidation):
			// 405: not mergeable, protection, review, merge queue; 422:
			// GitHub refused the request itself. Neither is retried.
			return MergeResult{}, &Error{Kind: KindNotMergeable}
		}
		return MergeResult{}, a.classify(err)
	}
	return MergeResult{Merged: true, SHA: merged}, nil
}

// Merged asks GET …/merge.
func (a *App) Merged(ctx context.Context, tok Token, repo Repo, n int) (bool, error) {
	gt, err := secret(tok)
	if err != nil {
		return false, err
	}
	ok, err := a.API.Merged(ctx, gt, repo.Owner, repo.Name, n)
	if err != nil {
		return false, a.classify(err)
	}
	return ok, nil
}

// ListRuns reads the candidate's Actions runs without a token.
func (a *App) ListRuns(ctx context.Context, repo Repo, headSHA, etag string) (Runs, error) {
	p, err := a.API.ListRuns(ctx, repo.Owner, repo.Name, headSHA, etag)
	if err != nil {
		return Runs{}, a.classify(err)
	}
	out := Runs{NotModified: p.NotModified, ETag: p.ETag, TotalCount: p.TotalCount,
		Rate: RateLimit{Limit: p.Rate.Limit, Remaining: p.Rate.Remaining, Reset: p.Rate.Reset}}
	for _, r := range p.Runs {
		out.Runs = append(out.Runs, Run{ID: r.ID, HeadSHA: r.HeadSHA, Status: r.Status, Conclusion: r.Conclusion})
	}
	return out, nil
}

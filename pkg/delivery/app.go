package delivery

import (
	"context"
	"crypto/rsa"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/supervise"
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
	// Git is the git executable.
	Git string
	// Reaper, when set, runs every git under the Gate's reapers, so that a
	// Gate killed mid-push leaves no git (holding a token) running.
	Reaper *supervise.ReaperPool
	// TempDir is a private directory where each push makes (and removes)
	// its own mirror and git home.
	TempDir string
	// Local returns the local bare repository holding repo's candidates.
	Local func(repo Repo) (LocalRepo, bool)
	// Secrets are the Gate's own secret values (owner and Worker tokens,
	// the App's key): CheckCandidate refuses a candidate holding one, or
	// an installation token the App minted and that is still live.
	Secrets *secretscan.Set
	// Log hears which file of a refused candidate holds a secret (the
	// path when evidence.ValidPath accepts it; never the value). Nil:
	// discarded.
	Log *slog.Logger

	mu     sync.Mutex
	minted map[string]time.Time // live installation token values → expiry
}

// LocalRepo is the Gate's bare repository of one delivered repository:
// where it is, its default branch (copied into the push mirror so that
// the push finds what GitHub already has), and the repository's bounds
// of one git command.
type LocalRepo struct {
	Dir            string
	DefaultBranch  string
	GitTimeout     time.Duration
	GitOutputBytes int64
}

// workspace is what one git operation on a repository's local copy needs:
// the repository, a fresh temporary directory (prefix names it) and a git
// runner whose private home lives in it. The caller removes tmp.
func (a *App) workspace(repo Repo, prefix string) (local LocalRepo, git *gitx.Runner, tmp string, err error) {
	local, ok := a.Local(repo)
	if !ok {
		return local, nil, "", &Error{Kind: KindNotFound}
	}
	tmp, err = os.MkdirTemp(a.TempDir, prefix)
	if err != nil {
		return local, nil, "", &Error{Kind: KindTransient}
	}
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		os.RemoveAll(tmp)
		return local, nil, "", &Error{Kind: KindTransient}
	}
	return local, &gitx.Runner{Git: a.Git, Home: home, Timeout: local.GitTimeout, OutputBytes: local.GitOutputBytes, Reaper: a.Reaper}, tmp, nil
}

// installation finds the App's installation on repo. The client signs a
// fresh App JWT for every request it sends, so waiting out GitHub's
// limits can never outlast the JWT.
func (a *App) installation(ctx context.Context, repo Repo) (*github.Installation, error) {
	inst, err := a.API.InstallationAs(ctx, github.App{ID: a.AppID, Key: a.Key}, repo.Owner, repo.Name)
	if err != nil {
		if github.IsClass(err, github.ClassNotFound) {
			return nil, &Error{Kind: KindNotInstalled}
		}
		return nil, a.classify(err)
	}
	return inst, nil
}

// mint asks installation inst for a token for repo with exactly perms.
func (a *App) mint(ctx context.Context, inst *github.Installation, repo Repo, perms github.Permissions) (Token, error) {
	tok, err := a.API.CreateTokenAs(ctx, github.App{ID: a.AppID, Key: a.Key}, inst.ID, repo.Name, perms)
	if err != nil {
		if errors.Is(err, github.ErrPermissionsMismatch) || github.IsClass(err, github.ClassValidation) {
			return Token{}, &Error{Kind: KindPermission}
		}
		return Token{}, a.classify(err)
	}
	a.remember(tok.Value(), tok.ExpiresAt)
	return Token{Secret: tok, ExpiresAt: tok.ExpiresAt, Budget: "installation:" + strconv.FormatInt(inst.ID, 10)}, nil
}

// remember keeps a minted token's value until it expires, for
// CheckCandidate.
func (a *App) remember(value string, exp time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.minted == nil {
		a.minted = map[string]time.Time{}
	}
	now := a.Now()
	for v, e := range a.minted {
		if !now.Before(e) {
			delete(a.minted, v)
		}
	}
	a.minted[value] = exp
}

// liveTokens is the set of the installation tokens minted and not yet
// expired (values too short to scan for cannot be GitHub's).
func (a *App) liveTokens() (*secretscan.Set, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b secretscan.Builder
	now := a.Now()
	for v, e := range a.minted {
		if now.Before(e) && len(v) >= secretscan.MinSecretBytes && len(v) <= secretscan.MaxSecretBytes {
			b.Add([]byte(v))
		}
	}
	return b.Set()
}

// CheckCandidate scans what candidate sha adds to its parent in the local
// repository (paths, blobs, symlink targets) for the Gate's secrets and
// the live installation tokens: KindSecret when it holds one, so the
// delivery fails before anything is pushed.
func (a *App) CheckCandidate(ctx context.Context, repo Repo, sha string) error {
	local, git, tmp, err := a.workspace(repo, "scan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c, err := github.ReadCommit(ctx, git, local.Dir, sha)
	if err != nil || len(c.Parents) != 1 {
		return &Error{Kind: KindPushRejected}
	}
	tokens, err := a.liveTokens()
	if err != nil {
		return &Error{Kind: KindTransient}
	}
	path, found, err := github.FindSecret(ctx, git, local.Dir, c.Parents[0], sha, a.Secrets, tokens)
	switch {
	case err != nil:
		return &Error{Kind: KindTransient}
	case found:
		if a.Log != nil {
			if !evidence.ValidPath(path) {
				path = "" // in a path itself, or not representable
			}
			a.Log.Warn("delivery: the candidate holds a secret of the Gate's", "owner", repo.Owner, "repo", repo.Name,
				"candidate", sha, "path", path, "code", CodeSecretInCandidate)
		}
		return &Error{Kind: KindSecret}
	}
	return nil
}

// MintToken mints a token for repo with contents and pull_requests
// write, and workflows write when workflows is set.
func (a *App) MintToken(ctx context.Context, repo Repo, workflows bool) (Token, error) {
	inst, err := a.installation(ctx, repo)
	if err != nil {
		return Token{}, err
	}
	perms := github.DerivePermissions(nil)
	if workflows {
		perms[github.PermWorkflows] = github.Write
	}
	tok, err := a.mint(ctx, inst, repo, perms)
	if e := (*Error)(nil); workflows && errors.As(err, &e) && e.Kind == KindPermission {
		return Token{}, &Error{Kind: KindWorkflowPermission}
	}
	return tok, err
}

// runsRecheck is how long a Gate reads runs unauthenticated before it
// asks again whether the installation grants actions: read.
const runsRecheck = time.Hour

// RunsToken mints a token holding only actions: read when repo's
// installation grants Actions read (or write), else returns the
// unauthenticated credential, to be asked for again after runsRecheck.
func (a *App) RunsToken(ctx context.Context, repo Repo) (Token, error) {
	inst, err := a.installation(ctx, repo)
	if err != nil {
		return Token{}, err
	}
	if lvl := inst.Permissions[github.PermActions]; lvl != github.Read && lvl != github.Write {
		return Token{ExpiresAt: a.Now().Add(runsRecheck)}, nil
	}
	return a.mint(ctx, inst, repo, github.Permissions{github.PermActions: github.Read})
}

// IntakeToken mints a token for repo holding what the intake poller needs
// (docs/intake.md): issues write (read issues, their events and comments;
// react; comment), pull requests read (the comments on pull requests),
// contents read (the default branch's head). The budget is the
// installation's, which delivery's polls spend too.
func (a *App) IntakeToken(ctx context.Context, repo Repo) (*github.Token, string, error) {
	inst, err := a.installation(ctx, repo)
	if err != nil {
		return nil, "", err
	}
	tok, err := a.mint(ctx, inst, repo, github.Permissions{github.PermIssues: github.Write,
		github.PermPullRequests: github.Read, github.PermContents: github.Read})
	if err != nil {
		return nil, "", err
	}
	g, err := secret(tok)
	if err != nil {
		return nil, "", err
	}
	return g, tok.Budget, nil
}

// TouchesWorkflows asks the local repository whether candidate sha
// changes anything under .github/workflows against its parent.
func (a *App) TouchesWorkflows(ctx context.Context, repo Repo, sha string) (bool, error) {
	local, git, tmp, err := a.workspace(repo, "inspect-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	c, err := github.ReadCommit(ctx, git, local.Dir, sha)
	if err != nil || len(c.Parents) != 1 {
		return false, &Error{Kind: KindPushRejected}
	}
	yes, err := github.WorkflowsChanged(ctx, git, local.Dir, c.Parents[0], sha)
	if err != nil {
		return false, &Error{Kind: KindTransient}
	}
	return yes, nil
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

// Push copies the candidate, and the local default branch (what GitHub
// had when the Gate last fetched: the push negotiates from it), from the
// local repository into a fresh mirror and creates the branch at it with
// tok (which holds workflows write when the candidate needs it), or, for
// a follow-up (over set), moves the branch from over to it: over must be
// the candidate's parent and the branch exactly at over. The branch
// already at the candidate is success.
func (a *App) Push(ctx context.Context, tok Token, repo Repo, branch, sha, over string) error {
	gt, err := secret(tok)
	if err != nil {
		return err
	}
	local, git, tmp, err := a.workspace(repo, "push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ref, err := candidateRef(ctx, git, local.Dir, sha)
	if err != nil {
		return err
	}
	refs := []string{ref}
	if def := "refs/heads/" + local.DefaultBranch; local.DefaultBranch != "" {
		if _, ok, err := github.ResolveRef(ctx, git, local.Dir, def); err == nil && ok {
			refs = append(refs, def)
		}
	}
	m, err := github.NewMirror(ctx, git, filepath.Join(tmp, "candidate.git"))
	if err != nil {
		return &Error{Kind: KindTransient}
	}
	if err := m.Copy(ctx, local.Dir, refs...); err != nil {
		return &Error{Kind: KindTransient}
	}
	c, err := github.ReadCommit(ctx, git, m.Dir, sha)
	if err != nil || len(c.Parents) != 1 || (over != "" && c.Parents[0] != over) {
		return &Error{Kind: KindPushRejected}
	}
	// Where the branch must be for the push, and what it is otherwise.
	moved := &Error{Kind: KindPushRejected}
	if over != "" {
		moved = &Error{Kind: KindBaseMoved}
	}
	remote, exists, err := m.RemoteBranch(ctx, gt, repo.Owner, repo.Name, branch)
	switch {
	case err != nil:
		return &Error{Kind: KindTransient}
	case exists && remote == sha:
		return nil
	case over == "" && exists, over != "" && (!exists || remote != over):
		return moved
	}
	if over == "" {
		err = m.PushNew(ctx, gt, repo.Owner, repo.Name, branch, sha)
	} else {
		err = m.PushOver(ctx, gt, repo.Owner, repo.Name, branch, over, sha)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, github.ErrWorkflowsRefused):
		return &Error{Kind: KindWorkflowPermission}
	case errors.Is(err, github.ErrPushRejected):
		return &Error{Kind: KindPushRejected}
	case errors.Is(err, github.ErrBranchConflict):
		remote, exists, rerr := m.RemoteBranch(ctx, gt, repo.Owner, repo.Name, branch)
		if rerr == nil && exists && remote == sha {
			return nil
		}
		return moved
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
		switch {
		case github.PRExists(err):
			return PullRequest{}, &Error{Kind: KindPRExists}
		case github.NoCommits(err):
			return PullRequest{}, &Error{Kind: KindNoCommits}
		case github.IsClass(err, github.ClassValidation):
			// "head invalid" right after the push (GitHub has not seen
			// the branch yet), or another refusal: retried, bounded.
			return PullRequest{}, &Error{Kind: KindPRInvalid}
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

// PullRequestIfChanged reads pull request n conditionally.
func (a *App) PullRequestIfChanged(ctx context.Context, tok Token, repo Repo, n int, etag string) (PullRequest, string, bool, error) {
	gt, err := secret(tok)
	if err != nil {
		return PullRequest{}, "", false, err
	}
	pr, tag, same, err := a.API.GetPullIfChanged(ctx, gt, repo.Owner, repo.Name, n, etag)
	if err != nil {
		return PullRequest{}, "", false, a.classify(err)
	}
	if same {
		return PullRequest{}, tag, true, nil
	}
	return pull(*pr), tag, false, nil
}

// Merge merges pull request n at exactly sha. 409 is KindHeadMoved;
// 405 "Base branch was modified" KindBaseModified (retried); any other
// 405, a 422 and 200 with merged false are KindNotMergeable (final).
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
		case github.BaseModified(err):
			return MergeResult{}, &Error{Kind: KindBaseModified}
		case errors.As(err, &e) && e.Class == github.ClassNotMerged:
			return MergeResult{Merged: false}, nil
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

// ListRuns reads the candidate's Actions runs with tok's token, or
// unauthenticated when it has none.
func (a *App) ListRuns(ctx context.Context, tok Token, repo Repo, headSHA, etag string) (Runs, error) {
	var gt *github.Token
	if tok.Authenticated() {
		var err error
		if gt, err = secret(tok); err != nil {
			return Runs{}, err
		}
	}
	p, err := a.API.ListRuns(ctx, gt, repo.Owner, repo.Name, headSHA, etag)
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

// Reviews reads pull request n's reviews, conditionally.
func (a *App) Reviews(ctx context.Context, tok Token, repo Repo, n int, etag string) (Reviews, error) {
	gt, err := secret(tok)
	if err != nil {
		return Reviews{}, err
	}
	p, err := a.API.ListReviews(ctx, gt, repo.Owner, repo.Name, n, etag)
	if err != nil {
		return Reviews{}, a.classify(err)
	}
	out := Reviews{NotModified: p.NotModified, ETag: p.ETag}
	for _, r := range p.Items {
		out.List = append(out.List, Review{Login: r.User.Login, Type: r.User.Type, State: r.State, CommitID: r.CommitID})
	}
	return out, nil
}

// Permission asks login's collaborator permission on repo.
func (a *App) Permission(ctx context.Context, tok Token, repo Repo, login string) (intake.Permission, error) {
	gt, err := secret(tok)
	if err != nil {
		return intake.Permission{}, err
	}
	p, err := a.API.Permission(ctx, gt, repo.Owner, repo.Name, login)
	if err != nil {
		return intake.Permission{}, a.classify(err)
	}
	return intake.Permission{Permission: p.Permission, RoleName: p.RoleName}, nil
}

package delivery

import (
	"context"
	"time"

	"github.com/0k-lab/agent-forge/pkg/intake"
)

// Repo names a GitHub repository.
type Repo struct {
	Owner string
	Name  string
}

// Token is an installation access token as the GitHub implementation
// minted it: Secret is its own opaque handle (pkg/github's *Token, which
// never formats its value), ExpiresAt when GitHub said it expires. The
// machine never reads the secret and never persists a Token.
type Token struct {
	Secret    any
	ExpiresAt time.Time
	// Budget names the rate-limit budget requests with this token spend
	// from: "" for unauthenticated requests (GitHub's 60 an hour per
	// address, shared by the whole Gate), otherwise the installation's.
	Budget string
}

// Authenticated reports whether t carries a credential (a runs token
// without one reads unauthenticated).
func (t Token) Authenticated() bool { return t.Secret != nil }

// String hides the token.
func (Token) String() string { return "[token]" }

// GoString hides the token.
func (Token) GoString() string { return "[token]" }

// PullRequest is what delivery needs of a pull request.
type PullRequest struct {
	Number         int
	URL            string // html_url
	State          string // "open" or "closed"
	Merged         bool
	MergeCommitSHA string
	HeadSHA        string
	HeadRef        string
	BaseRef        string
}

// NewPullRequest is the body of a pull request creation.
type NewPullRequest struct {
	Title string
	Head  string // branch name (same repository)
	Base  string
	Body  string
}

// Run is one workflow run of the Actions runs list.
type Run struct {
	ID         int64
	HeadSHA    string
	Status     string
	Conclusion string
}

// RateLimit is what the x-ratelimit-* headers of an answer said; zero
// Limit when absent.
type RateLimit struct {
	Limit     int
	Remaining int
	Reset     time.Time
}

// Runs is one answer of the Actions runs list. NotModified: GitHub
// answered 304 to If-None-Match, Runs and TotalCount are empty.
type Runs struct {
	NotModified bool
	ETag        string
	TotalCount  int
	Runs        []Run
	Rate        RateLimit
}

// Review is one review of a pull request, as GitHub lists them (oldest
// first): the reviewer's login and account type, the state (APPROVED,
// CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING) and the commit it
// was given on.
type Review struct {
	Login, Type     string
	State, CommitID string
}

// Reviews is one answer of a pull request's reviews. NotModified:
// GitHub answered 304 to If-None-Match, List is empty.
type Reviews struct {
	NotModified bool
	ETag        string
	List        []Review
}

// MergeResult is the answer of a merge.
type MergeResult struct {
	Merged bool
	SHA    string
}

// GitHub is the GitHub work delivery needs. pkg/github implements it for
// the real API; tests use a double. Every method returns an *Error (or an
// error wrapping one) on failure so the machine can classify it; any other
// error is treated as transient.
type GitHub interface {
	// MintToken mints an installation token scoped to repo with the
	// permissions delivery needs: contents and pull_requests write, and
	// workflows write when workflows is set (KindWorkflowPermission when
	// the installation lacks it).
	MintToken(ctx context.Context, repo Repo, workflows bool) (Token, error)
	// RunsToken returns the credential for reading repo's Actions runs:
	// a token holding only actions: read when the App's installation
	// grants it (DECISIONS 16), else a Token without Secret (read
	// unauthenticated). ExpiresAt says when to ask again.
	RunsToken(ctx context.Context, repo Repo) (Token, error)
	// TouchesWorkflows reports whether the candidate sha changes
	// anything under .github/workflows against its parent.
	TouchesWorkflows(ctx context.Context, repo Repo, sha string) (bool, error)
	// CheckCandidate scans what candidate sha adds to its parent for the
	// Gate's secrets (KindSecret when it holds one); the machine asks it
	// before every push.
	CheckCandidate(ctx context.Context, repo Repo, sha string) error
	// Push pushes sha to refs/heads/branch without force. With over
	// empty the branch must not exist; otherwise it must be at over (sha's
	// parent: a fast-forward). The branch already at sha is success; at
	// another commit it is KindPushRejected (over empty) or KindBaseMoved.
	Push(ctx context.Context, tok Token, repo Repo, branch, sha, over string) error
	// FindPullRequest lists pull requests of head owner:branch in any
	// state; found is false when there is none.
	FindPullRequest(ctx context.Context, tok Token, repo Repo, branch string) (pr PullRequest, found bool, err error)
	// CreatePullRequest creates a pull request.
	CreatePullRequest(ctx context.Context, tok Token, repo Repo, p NewPullRequest) (PullRequest, error)
	// PullRequest reads pull request n.
	PullRequest(ctx context.Context, tok Token, repo Repo, n int) (PullRequest, error)
	// PullRequestIfChanged reads pull request n with If-None-Match: etag
	// (when set); notModified is GitHub's 304 (pr is then empty).
	PullRequestIfChanged(ctx context.Context, tok Token, repo Repo, n int, etag string) (pr PullRequest, newETag string, notModified bool, err error)
	// Merge merges pull request n with merge_method "merge" and sha.
	Merge(ctx context.Context, tok Token, repo Repo, n int, sha string) (MergeResult, error)
	// Reviews lists pull request n's reviews with If-None-Match: etag
	// (when set).
	Reviews(ctx context.Context, tok Token, repo Repo, n int, etag string) (Reviews, error)
	// Permission asks GitHub's collaborator permission of login on repo
	// (intake.Authorize reads it).
	Permission(ctx context.Context, tok Token, repo Repo, login string) (intake.Permission, error)
	// Merged asks GET …/pulls/{n}/merge: true on 204, false on 404.
	Merged(ctx context.Context, tok Token, repo Repo, n int) (bool, error)
	// ListRuns reads the Actions runs of head_sha with tok (from
	// RunsToken; unauthenticated without Secret), with If-None-Match:
	// etag when etag is not empty.
	ListRuns(ctx context.Context, tok Token, repo Repo, headSHA, etag string) (Runs, error)
}

// Kind classifies a GitHub failure.
type Kind int

// Failure kinds.
const (
	KindTransient          Kind = iota // network, 5xx, malformed answer: retry the phase
	KindRateLimited                    // 403/429 over a limit: wait RetryAt
	KindPermission                     // 403 "not accessible by integration", 422 on token permissions
	KindNotInstalled                   // the App is not installed on the repository
	KindPushRejected                   // non-fast-forward, protected branch, branch at another commit
	KindWorkflowPermission             // push touches .github/workflows without workflows permission
	KindPRExists                       // 422 "A pull request already exists"
	KindNoCommits                      // 422 "No commits between"
	KindHeadMoved                      // 409 on merge
	KindNotMergeable                   // 405 (but base modified), 422 or merged=false on merge
	KindBaseModified                   // 405 "Base branch was modified": re-read and retry the merge
	KindNotFound                       // 404 of a resource that should exist
	KindTokenRejected                  // 401 to an installation token: mint a fresh one and retry
	KindPRInvalid                      // another 422 on PR creation (head invalid right after the push): retry, bounded
	KindSecret                         // the candidate holds a secret of the Gate's: never pushed
	KindBaseMoved                      // a follow-up's branch is not at its base: never pushed over
)

// Error is a classified GitHub failure. It carries no GitHub text.
type Error struct {
	Kind Kind
	// RetryAt is when a rate-limited request may be sent again (zero when
	// GitHub said nothing: the machine then waits at least a minute).
	RetryAt time.Time
}

func (e *Error) Error() string {
	switch e.Kind {
	case KindRateLimited:
		return "github: rate limited"
	case KindPermission:
		return "github: permission denied"
	case KindNotInstalled:
		return "github: app not installed"
	case KindPushRejected:
		return "github: push rejected"
	case KindWorkflowPermission:
		return "github: workflows permission missing"
	case KindPRExists:
		return "github: pull request exists"
	case KindNoCommits:
		return "github: no commits between head and base"
	case KindHeadMoved:
		return "github: head moved"
	case KindNotMergeable:
		return "github: merge refused"
	case KindNotFound:
		return "github: not found"
	case KindTokenRejected:
		return "github: token rejected"
	case KindBaseModified:
		return "github: base branch modified during the merge"
	case KindPRInvalid:
		return "github: pull request refused"
	case KindSecret:
		return "delivery: the candidate holds a secret"
	case KindBaseMoved:
		return "github: the branch moved past the follow-up's base"
	}
	return "github: transient failure"
}

package publish

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

// Bounds of one publication's git commands and PR reconciliation.
const (
	GitTimeout       = 10 * time.Minute
	GitOutputBytes   = 16 << 20
	reconcileRounds  = 4
	reconcileBackoff = time.Second
	revokeTimeout    = 30 * time.Second
)

// Env is what a publication takes from its surroundings. Transport is the
// seam tests use to reach a fake GitHub without the network; production
// passes nil (the system's HTTPS stack).
type Env struct {
	Now       func() time.Time
	Transport http.RoundTripper
	Sleep     func(context.Context, time.Duration) error // nil: a timer
	TempDir   string                                     // "": os.TempDir()
}

// Result is forge-github's output, one JSON object on stdout.
type Result struct {
	Version       int    `json:"version"`
	Branch        string `json:"branch"`
	PRNumber      int    `json:"pr_number"`
	PRURL         string `json:"pr_url"`
	CandidateSHA  string `json:"candidate_sha"`
	BranchCreated bool   `json:"branch_created"`
	PRCreated     bool   `json:"pr_created"`
}

// Publisher carries one publication through.
type Publisher struct {
	cfg   *Config
	creds *Credentials
	env   Env
	gh    *github.Client
}

// New returns a Publisher for a loaded config.
func New(cfg *Config, creds *Credentials, env Env) *Publisher {
	if env.Now == nil {
		env.Now = time.Now
	}
	return &Publisher{cfg: cfg, creds: creds, env: env,
		gh: github.New(env.Transport, env.Now, github.Options{Sleep: env.Sleep})}
}

// Run publishes p: local checks, the private copy, the token, the branch
// and the pull request. Errors are *Error values.
func (pb *Publisher) Run(ctx context.Context, p *Publication) (*Result, error) {
	tmp, err := os.MkdirTemp(pb.env.TempDir, "forge-github-")
	if err != nil {
		return nil, fail(StageConfig, CodeTempUnavailable)
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	if os.Mkdir(home, 0o700) != nil {
		return nil, fail(StageConfig, CodeTempUnavailable)
	}
	git := &gitx.Runner{Git: pb.cfg.GitExecutable, Home: home, Timeout: GitTimeout, OutputBytes: GitOutputBytes}

	if err := pb.checkLocal(ctx, git, p); err != nil {
		return nil, err
	}
	mirror, err := github.NewMirror(ctx, git, filepath.Join(tmp, "candidate.git"))
	if err != nil {
		return nil, fail(StageConfig, CodeGitFailed)
	}
	base := "refs/heads/" + p.BaseBranch
	if err := mirror.Copy(ctx, filepath.Join(pb.cfg.LocalRepository, ".git"), base, p.CandidateRef); err != nil {
		return nil, fail(StageConfig, CodeGitFailed)
	}
	if err := verifyCandidate(ctx, git, mirror.Dir, p); err != nil {
		return nil, err
	}
	workflows, err := github.WorkflowsChanged(ctx, git, mirror.Dir, p.ExpectedParentSHA, p.CandidateSHA)
	if err != nil {
		return nil, fail(StageConfig, CodeGitFailed)
	}
	perms := github.DerivePermissions(nil)
	if workflows {
		perms[github.PermWorkflows] = github.Write
	}

	tok, err := pb.token(ctx, perms)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Revoke even when ctx was cancelled, within its own bound.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
		pb.gh.Revoke(rctx, tok)
		cancel()
	}()
	if err := pb.checkSecrets(ctx, git, mirror.Dir, tok, p); err != nil {
		return nil, err
	}
	if err := pb.checkRemoteBase(ctx, mirror, tok, p); err != nil {
		return nil, err
	}
	return pb.publish(ctx, mirror, tok, p)
}

// checkSecrets refuses a candidate that holds a secret forge-github
// holds (the App's private key, the installation token just minted),
// before anything reaches GitHub: what the candidate adds to its parent
// in the private copy is scanned (github.FindSecret).
func (pb *Publisher) checkSecrets(ctx context.Context, git *gitx.Runner, dir string, tok *github.Token, p *Publication) error {
	var b secretscan.Builder
	b.AddRSAKey(pb.creds.Key)
	if v := tok.Value(); len(v) >= secretscan.MinSecretBytes && len(v) <= secretscan.MaxSecretBytes {
		b.Add([]byte(v))
	}
	set, err := b.Set()
	if err != nil {
		return fail(StageConfig, CodeKeyInvalid)
	}
	_, found, err := github.FindSecret(ctx, git, dir, p.ExpectedParentSHA, p.CandidateSHA, set)
	switch {
	case err != nil:
		return fail(StageConfig, CodeGitFailed)
	case found:
		return fail(StageRefused, CodeSecretInCandidate)
	}
	return nil
}

// checkRemoteBase refuses to publish local base commits GitHub has not
// seen: expected_parent_sha must be GitHub's base branch or one of its
// ancestors (the base branch is fetched into the mirror to know), else
// the pull request would carry unreviewed commits along.
func (pb *Publisher) checkRemoteBase(ctx context.Context, m *github.Mirror, tok *github.Token, p *Publication) error {
	remote, ok, err := m.Fetch(ctx, tok, pb.cfg.Owner, pb.cfg.Repository, p.BaseBranch)
	if err != nil {
		return fail(StageGitHub, CodeFetchFailed)
	}
	if !ok {
		return fail(StageRefused, CodeBaseDrift)
	}
	in, err := m.IsAncestor(ctx, p.ExpectedParentSHA, remote)
	if err != nil {
		return fail(StageConfig, CodeGitFailed)
	}
	if !in {
		return fail(StageRefused, CodeBaseDrift)
	}
	return nil
}

// checkLocal: a clean worktree whose base branch is the expected parent
// and whose candidate ref is the candidate, with the expected tree and
// single parent.
func (pb *Publisher) checkLocal(ctx context.Context, git *gitx.Runner, p *Publication) error {
	dir := pb.cfg.LocalRepository
	gitDir := filepath.Join(dir, ".git")
	status, err := git.Run(ctx, gitx.Cmd{Dir: dir, GitDir: gitDir, WorkTree: dir, Env: []string{"GIT_OPTIONAL_LOCKS=0"},
		Args: []string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none"}})
	if err != nil {
		return fail(StageConfig, CodeGitFailed)
	}
	if len(status) != 0 {
		return fail(StageRefused, CodeWorktreeDirty)
	}
	sha, ok, err := github.ResolveRef(ctx, git, gitDir, "refs/heads/"+p.BaseBranch)
	if err != nil {
		return fail(StageConfig, CodeGitFailed)
	}
	if !ok || sha != p.ExpectedParentSHA {
		return fail(StageRefused, CodeBaseDrift)
	}
	return verifyCandidate(ctx, git, gitDir, p)
}

// verifyCandidate checks, in gitDir, the base branch, the candidate ref,
// and the candidate commit's tree and parent.
func verifyCandidate(ctx context.Context, git *gitx.Runner, gitDir string, p *Publication) error {
	sha, ok, err := github.ResolveRef(ctx, git, gitDir, "refs/heads/"+p.BaseBranch)
	if err != nil {
		return fail(StageConfig, CodeGitFailed)
	}
	if !ok || sha != p.ExpectedParentSHA {
		return fail(StageRefused, CodeBaseDrift)
	}
	sha, ok, err = github.ResolveRef(ctx, git, gitDir, p.CandidateRef)
	if err != nil {
		return fail(StageConfig, CodeGitFailed)
	}
	if !ok || sha != p.CandidateSHA {
		return fail(StageRefused, CodeCandidateMismatch)
	}
	c, err := github.ReadCommit(ctx, git, gitDir, p.CandidateSHA)
	if err != nil {
		return fail(StageRefused, CodeCandidateMismatch)
	}
	if c.Tree != p.ExpectedTreeSHA {
		return fail(StageRefused, CodeTreeMismatch)
	}
	if len(c.Parents) != 1 || c.Parents[0] != p.ExpectedParentSHA {
		return fail(StageRefused, CodeParentMismatch)
	}
	return nil
}

// token finds the installation and mints a token with exactly perms.
func (pb *Publisher) token(ctx context.Context, perms github.Permissions) (*github.Token, error) {
	if _, err := github.AppJWT(pb.creds.Key, pb.creds.AppID, pb.env.Now()); err != nil {
		return nil, fail(StageConfig, CodeKeyInvalid)
	}
	// Every attempt signs a fresh JWT: waiting out limits can outlast one.
	app := github.App{ID: pb.creds.AppID, Key: pb.creds.Key}
	inst, err := pb.gh.InstallationAs(ctx, app, pb.cfg.Owner, pb.cfg.Repository)
	if err != nil {
		return nil, apiFailure(err, CodeAPIFailed)
	}
	tok, err := pb.gh.CreateTokenAs(ctx, app, inst.ID, pb.cfg.Repository, perms)
	if err != nil {
		if errors.Is(err, github.ErrPermissionsMismatch) {
			return nil, fail(StageGitHub, CodePermissionsWrong)
		}
		if github.IsClass(err, github.ClassValidation) {
			return nil, fail(StageGitHub, CodePermissionDenied)
		}
		return nil, apiFailure(err, CodeAPIFailed)
	}
	return tok, nil
}

// apiFailure maps an API error's class to a code (fallback for the rest).
func apiFailure(err error, fallback Code) error {
	switch {
	case github.IsClass(err, github.ClassNotFound):
		return fail(StageGitHub, CodeNotInstalled)
	case github.IsClass(err, github.ClassUnauthorized):
		return fail(StageGitHub, CodeAppUnauthorized)
	case github.IsClass(err, github.ClassPermission):
		return fail(StageGitHub, CodePermissionDenied)
	case github.IsClass(err, github.ClassRateLimited):
		return fail(StageGitHub, CodeRateLimited)
	}
	return fail(StageGitHub, fallback)
}

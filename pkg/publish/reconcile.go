package publish

import (
	"context"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
)

// publish makes the branch exist at the candidate and exactly one open PR
// for it. Existing PRs are read first: a closed or merged one is final,
// so nothing is pushed.
func (pb *Publisher) publish(ctx context.Context, m *github.Mirror, tok *github.Token, p *Publication) (*Result, error) {
	owner, repo := pb.cfg.Owner, pb.cfg.Repository
	res := &Result{Version: 1, Branch: p.NewBranch, CandidateSHA: p.CandidateSHA}
	prs, err := pb.gh.PullsForBranch(ctx, tok, owner, repo, p.NewBranch)
	if err != nil {
		return nil, apiFailure(err, CodeAPIFailed)
	}
	existing, err := choose(prs, p)
	if err != nil {
		return nil, err
	}

	sha, exists, err := m.RemoteBranch(ctx, tok, owner, repo, p.NewBranch)
	if err != nil {
		return nil, fail(StageGitHub, CodePushFailed)
	}
	switch {
	case exists && sha != p.CandidateSHA:
		return nil, fail(StageRefused, CodeBranchConflict)
	case !exists:
		if err := pb.push(ctx, m, tok, p); err != nil {
			return nil, err
		}
		res.BranchCreated = true
	}

	if existing == nil {
		pr, created, err := pb.createPR(ctx, tok, p)
		if err != nil {
			return nil, err
		}
		existing, res.PRCreated = pr, created
	}
	res.PRNumber, res.PRURL = existing.Number, existing.URL
	return res, nil
}

func (pb *Publisher) push(ctx context.Context, m *github.Mirror, tok *github.Token, p *Publication) error {
	err := m.PushNew(ctx, tok, pb.cfg.Owner, pb.cfg.Repository, p.NewBranch, p.CandidateSHA)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, github.ErrWorkflowsRefused):
		return fail(StageGitHub, CodeWorkflowsRefused)
	case errors.Is(err, github.ErrPushRejected):
		// A rule of the repository: repeating cannot help.
		return fail(StageRefused, CodePushRejected)
	}
	// Someone created the branch meanwhile, or GitHub carried out a push
	// whose answer was lost: read the branch before deciding. It counts
	// only at the candidate.
	sha, exists, rerr := m.RemoteBranch(ctx, tok, pb.cfg.Owner, pb.cfg.Repository, p.NewBranch)
	switch {
	case rerr == nil && exists && sha == p.CandidateSHA:
		return nil
	case rerr == nil && exists || errors.Is(err, github.ErrBranchConflict):
		return fail(StageRefused, CodeBranchConflict)
	}
	return fail(StageGitHub, CodePushFailed)
}

// choose picks the PR to reuse from the branch's PRs: nil when there is
// none. A closed or merged PR is final; an open one must have the
// candidate as head and the base branch as base.
func choose(prs []github.PullRequest, p *Publication) (*github.PullRequest, error) {
	var open *github.PullRequest
	for i := range prs {
		pr := &prs[i]
		if !pr.Open() {
			return nil, fail(StageRefused, CodePRClosed)
		}
		if open != nil || pr.HeadSHA != p.CandidateSHA || pr.BaseRef != p.BaseBranch {
			return nil, fail(StageRefused, CodePRConflict)
		}
		open = pr
	}
	return open, nil
}

// createPR opens the PR. When the outcome is uncertain (a lost response,
// a 5xx) or GitHub says one already exists, it reads the branch's PRs
// and adopts the one that matches; only when none is there does it try
// again (GitHub itself refuses a second open PR for one head, so a
// repeated create can never duplicate). Everything is bounded.
func (pb *Publisher) createPR(ctx context.Context, tok *github.Token, p *Publication) (*github.PullRequest, bool, error) {
	owner, repo := pb.cfg.Owner, pb.cfg.Repository
	wait := reconcileBackoff
	for round := 0; ; round++ {
		pr, err := pb.gh.CreatePull(ctx, tok, owner, repo, p.NewBranch, p.BaseBranch, p.PRTitle, p.PRBody)
		if err == nil {
			if pr.HeadSHA != p.CandidateSHA || pr.HeadRef != p.NewBranch || pr.BaseRef != p.BaseBranch || !pr.Open() {
				return nil, false, fail(StageGitHub, CodeAPIFailed)
			}
			return pr, true, nil
		}
		exists := github.PRExists(err)
		if github.HeadInvalid(err) {
			// GitHub has not caught up with the push yet: try again,
			// bounded like every round.
			if round+1 >= reconcileRounds || pb.sleep(ctx, wait) != nil {
				return nil, false, fail(StageGitHub, CodePRRefused)
			}
			wait *= 2
			continue
		}
		if !exists && !github.IsClass(err, github.ClassTransport) && !github.IsClass(err, github.ClassServer) {
			if github.IsClass(err, github.ClassValidation) {
				return nil, false, fail(StageGitHub, CodePRRefused)
			}
			return nil, false, apiFailure(err, CodeAPIFailed)
		}
		prs, lerr := pb.gh.PullsForBranch(ctx, tok, owner, repo, p.NewBranch)
		if lerr != nil {
			return nil, false, apiFailure(lerr, CodeAPIFailed)
		}
		found, cerr := choose(prs, p)
		if cerr != nil {
			// Found after the branch was pushed: GitHub has changed, so
			// this is not a "nothing changed" refusal.
			var e *Error
			if errors.As(cerr, &e) {
				return nil, false, fail(StageGitHub, e.Code)
			}
			return nil, false, cerr
		}
		if found != nil {
			// Made by the request whose answer was lost, or by a
			// concurrent run of the same publication.
			return found, !exists, nil
		}
		if round+1 >= reconcileRounds || pb.sleep(ctx, wait) != nil {
			return nil, false, fail(StageGitHub, CodeAPIFailed)
		}
		wait *= 2
	}
}

func (pb *Publisher) sleep(ctx context.Context, d time.Duration) error {
	if pb.env.Sleep != nil {
		return pb.env.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

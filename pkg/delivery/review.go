package delivery

import (
	"context"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/intake"
)

// minReviewPoll is the least time between two reads of a waiting pull
// request's reviews: a person's review takes minutes, and each read
// that changed costs a request of the installation's budget.
const minReviewPoll = time.Minute

// Review states as GitHub names them.
const (
	reviewApproved         = "APPROVED"
	reviewChangesRequested = "CHANGES_REQUESTED"
	reviewDismissed        = "DISMISSED"
)

// Verdicts returns, from reviews (GitHub's order, oldest first), the
// reviewers whose latest verdict (an approval, a request for changes or
// a dismissal; comments and pending reviews are none) approves exactly
// head, and those whose latest verdict requests changes, whatever the
// commit. Bots and the logins in excluded (compared without case) are in
// neither: their reviews never count. A new commit therefore voids every
// earlier approval (DECISIONS 18), and a dismissed approval is none.
func Verdicts(reviews []Review, head string, excluded []string) (approving, requesting []Review) {
	latest := map[string]int{}
	var order []string
	for i, r := range reviews {
		switch r.State {
		case reviewApproved, reviewChangesRequested, reviewDismissed:
		default:
			continue
		}
		key := strings.ToLower(r.Login)
		if _, ok := latest[key]; !ok {
			order = append(order, key)
		}
		latest[key] = i
	}
	for _, key := range order {
		r := reviews[latest[key]]
		if r.Login == "" || r.Type == "Bot" || strings.HasSuffix(r.Login, "[bot]") || excludedLogin(r.Login, excluded) {
			continue
		}
		switch {
		case r.State == reviewApproved && r.CommitID == head:
			approving = append(approving, r)
		case r.State == reviewChangesRequested:
			requesting = append(requesting, r)
		}
	}
	return approving, requesting
}

func excludedLogin(login string, excluded []string) bool {
	for _, e := range excluded {
		if strings.EqualFold(e, login) {
			return true
		}
	}
	return false
}

// review waits, under the merge policy "review", for an approval of the
// candidate: it reads the pull request (closed, merged by a person or
// moved end it, as in ci) and, when they changed, its reviews. The
// delivery moves to merge once a reviewer whose latest verdict approves
// exactly the candidate, who asked for none of its jobs (Requesters) and
// whom GitHub's collaborator permission authorises (intake.Authorize:
// write or better, no bot) approved it, and no authorised reviewer's
// latest verdict requests changes. The merge phase's timeout counts from
// then.
func (m *Machine) review(ctx context.Context, s State) (State, error) {
	if !s.Review {
		// The policy became auto (a restarted Gate's configuration): CI
		// passed, nothing more is waited for.
		s = m.advance(s, PhaseMerge)
		s.StartedAt = s.NextAt
		return s, nil
	}
	next, done, err := m.prDuringCI(ctx, s)
	if err != nil || done {
		return next, err
	}
	s = next
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, err
	}
	poll := max(m.cfg.PollInterval, minReviewPoll)
	rv, err := m.gh.Reviews(ctx, tok, s.Repo, s.PRNumber, s.ReviewsETag)
	if err != nil {
		return s, err
	}
	s.PhaseAttempts = 0
	if rv.NotModified {
		s.NextAt = m.clock.Now().Add(poll)
		return s, nil
	}
	approving, requesting := Verdicts(rv.List, s.CandidateSHA, s.Requesters)
	approved := false
	for _, r := range requesting {
		ok, err := m.authorised(ctx, tok, s.Repo, r)
		if err != nil {
			return s, err
		}
		if ok {
			// Changes requested by someone who may: wait for their
			// next verdict (or a follow-up).
			s.ReviewsETag, s.NextAt = rv.ETag, m.clock.Now().Add(poll)
			return s, nil
		}
	}
	for _, r := range approving {
		if approved, err = m.authorised(ctx, tok, s.Repo, r); err != nil {
			return s, err
		}
		if approved {
			break
		}
	}
	// Kept only once every answer it depends on was read.
	s.ReviewsETag = rv.ETag
	if !approved {
		s.NextAt = m.clock.Now().Add(poll)
		return s, nil
	}
	s = m.advance(s, PhaseMerge)
	s.StartedAt = s.NextAt
	return s, nil
}

// authorised asks GitHub whether reviewer r may write to repo.
func (m *Machine) authorised(ctx context.Context, tok Token, repo Repo, r Review) (bool, error) {
	if !ident.ValidGitHubLogin(r.Login) {
		return false, nil // not an account GitHub could name
	}
	p, err := m.gh.Permission(ctx, tok, repo, r.Login)
	if err != nil {
		return false, err
	}
	return intake.Authorize(p, intake.Actor{Login: r.Login, Type: r.Type}, "").Start, nil
}

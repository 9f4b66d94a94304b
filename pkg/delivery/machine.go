package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

const (
	// tokenMargin: a token is replaced this long before its expires_at, so
	// no request (a push may take git_timeout) runs on an expired token.
	tokenMargin = 5 * time.Minute
	// minRateWait is the wait after a rate-limited answer that named no
	// time (GitHub: "wait at least a minute").
	minRateWait = time.Minute
	// mutationGap spaces mutations (push, create, merge) of all
	// deliveries: GitHub's secondary limits ask for about one a second.
	mutationGap = time.Second
)

// Clock is the machine's time: Now, and Sleep that returns early (with
// ctx's error) when ctx ends.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// Machine performs delivery steps. It is safe for concurrent use by the
// goroutines of different deliveries.
type Machine struct {
	gh    GitHub
	cfg   Config
	clock Clock

	mu     sync.Mutex
	tokens map[tokenKey]Token

	mutMu   sync.Mutex
	lastMut time.Time

	// pollMu guards nextPoll: per rate-limit budget (Token.Budget), the
	// earliest time any delivery may poll the runs list again, so that
	// all of them together keep to the budget they share.
	pollMu   sync.Mutex
	nextPoll map[string]time.Time
	share    map[string]time.Duration // per budget: one paid poll's share, from the last answer
	rate     map[string]RateLimit     // per budget: the last answer's headers
	// waiting: the deliveries in ci reading runs unauthenticated, by job,
	// with the start of their ci phase (admission, ci.go).
	waiting map[string]time.Time
	// describe writes the pull request's title and body (Describe); nil:
	// the job id and prBody.
	describe Describer
}

// Describer writes the title and body of the pull request that delivers
// s, from what the store knows of its job. An error retries the phase.
type Describer func(ctx context.Context, s State) (title, body string, err error)

// Describe makes d write every pull request this Machine creates. Call it
// before the first Step.
func (m *Machine) Describe(d Describer) { m.describe = d }

// tokenKey names a cached token: the repository and what it may do.
type tokenKey struct {
	repo      Repo
	workflows bool // a delivery token adding workflows: write
	runs      bool // the runs token (RunsToken)
}

// NewMachine returns a Machine using gh.
func NewMachine(gh GitHub, cfg Config, clock Clock) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{gh: gh, cfg: cfg, clock: clock, tokens: map[tokenKey]Token{}, nextPoll: map[string]time.Time{},
		share: map[string]time.Duration{}, rate: map[string]RateLimit{}, waiting: map[string]time.Time{}}, nil
}

// Step runs s's phase once (the caller waits until s.NextAt first) and
// returns the state to commit. The error is only ctx's: the Gate is
// stopping and s must not change.
func (m *Machine) Step(ctx context.Context, s State) (State, error) {
	if s.Phase.Terminal() {
		return s, nil
	}
	now := m.clock.Now()
	// The wait for a person's review is not bounded: the timeout counts
	// the Gate's own work, up to the CI verdict and from the approval.
	if s.Phase != PhaseReview && !now.Before(s.StartedAt.Add(m.cfg.Timeout)) {
		return m.timedOut(ctx, s)
	}
	var (
		next State
		err  error
	)
	switch s.Phase {
	case PhasePush:
		next, err = m.push(ctx, s)
	case PhasePullRequest:
		next, err = m.pullRequest(ctx, s)
	case PhaseCI:
		next, err = m.ci(ctx, s)
	case PhaseReview:
		next, err = m.review(ctx, s)
	case PhaseMerge:
		next, err = m.merge(ctx, s)
	default:
		return fail(s, CodeUnavailable), nil
	}
	if ctx.Err() != nil {
		return s, ctx.Err()
	}
	if err != nil {
		next = m.onError(s, err)
	}
	if s.Phase == PhaseCI && next.Phase != PhaseCI {
		m.leaveCI(s.JobID)
	}
	// No wait outlasts the delivery: the step at the deadline ends it.
	if deadline := next.StartedAt.Add(m.cfg.Timeout); !next.Phase.Terminal() && next.Phase != PhaseReview && next.NextAt.After(deadline) {
		next.NextAt = deadline
	}
	return next, nil
}

// timedOut ends a delivery whose timeout elapsed. In the merge phase it
// first asks whether the pull request is merged (a merge whose answer was
// lost is a success, not a timeout).
func (m *Machine) timedOut(ctx context.Context, s State) (State, error) {
	switch s.Phase {
	case PhaseMerge:
		// A merge request may have been sent: never report a timeout
		// without knowing it did not merge.
		next, done, err := m.reconcileMerge(ctx, s)
		switch {
		case ctx.Err() != nil:
			return s, ctx.Err()
		case err != nil:
			return m.onError(s, err), nil
		case done:
			return next, nil
		}
	case PhaseCI:
		// A person may have merged it meanwhile (best effort).
		if next, done := m.mergedByPerson(ctx, s); done {
			return next, nil
		}
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		// Polls that answered and saw no run: ci_no_runs. Pending runs,
		// or no answer at all (rate limits, waiting for its turn in the
		// unauthenticated budget): ci_timed_out.
		if (s.CIState == CIWaiting || s.CIState == "") && s.RunsKey != "" {
			s.CIState = CINoRuns
			return fail(s, CodeCINoRuns), nil
		}
		return fail(s, CodeCITimedOut), nil
	case PhasePullRequest:
		// A creation whose answer was lost may have left one: name it
		// for the operator (best effort, nothing is created).
		if tok, err := m.token(ctx, &s); err == nil {
			if pr, found, err := m.gh.FindPullRequest(ctx, tok, s.Repo, s.Branch); err == nil && found {
				s.PRNumber, s.PRURL = pr.Number, pr.URL
			}
		}
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
	}
	return fail(s, CodeTimedOut), nil
}

// Abandon is s ended because this Gate has no delivery configured: the
// job gets a final, visible code instead of staying delivering forever.
// Branch and pull request stay as they are on GitHub.
func Abandon(s State) State { return fail(s, CodeUnconfigured) }

func fail(s State, code string) State {
	s.Phase, s.Code, s.PhaseAttempts = PhaseFailed, code, 0
	return s
}

func (m *Machine) advance(s State, p Phase) State {
	s.Phase, s.PhaseAttempts, s.NextAt = p, 0, m.clock.Now()
	return s
}

// onError folds a failed phase step into the state: wait out a rate
// limit, retry a transient failure with back-off, or fail with the code of
// a final refusal.
func (m *Machine) onError(s State, err error) State {
	// A failed poll used its slot: the next one takes a new turn.
	s.PollReserved = false
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Kind: KindTransient}
	}
	switch e.Kind {
	case KindRateLimited:
		s.NextAt = m.clock.Now().Add(minRateWait)
		if e.RetryAt.After(s.NextAt) {
			s.NextAt = e.RetryAt
		}
		return s
	case KindTransient, KindPRExists:
		return m.retry(s, CodeUnavailable)
	case KindBaseModified:
		// The next try re-reads the pull request (its head must still be
		// the candidate) before it merges again.
		return m.retry(s, CodeMergeRefused)
	case KindPRInvalid:
		return m.retry(s, CodePRRefused)
	case KindTokenRejected:
		// The cached tokens are dropped; the retry mints fresh ones.
		m.mu.Lock()
		for k := range m.tokens {
			if k.repo == s.Repo {
				delete(m.tokens, k)
			}
		}
		m.mu.Unlock()
		return m.retry(s, CodePermissionDenied)
	}
	return fail(s, finalCode(e.Kind))
}

// finalCode is the failure code of a refusal that ends a delivery at once;
// any other kind is a GitHub that stays unavailable.
func finalCode(k Kind) string {
	switch k {
	case KindPermission:
		return CodePermissionDenied
	case KindNotInstalled:
		return CodeNotInstalled
	case KindNotFound:
		return CodeRepositoryNotFound
	case KindPushRejected:
		return CodePushRejected
	case KindWorkflowPermission:
		return CodeWorkflowPermission
	case KindNoCommits:
		return CodePRRefused
	case KindHeadMoved:
		return CodeHeadMoved
	case KindNotMergeable:
		return CodeMergeRefused
	case KindSecret:
		return CodeSecretInCandidate
	case KindBaseMoved:
		return CodeBaseMoved
	}
	return CodeUnavailable
}

// retry counts one more failed try of the phase and schedules the next
// after the back-off, or fails with code once max_attempts are used.
func (m *Machine) retry(s State, code string) State {
	s.PhaseAttempts++
	if s.PhaseAttempts >= m.cfg.MaxAttempts {
		return fail(s, code)
	}
	s.NextAt = m.clock.Now().Add(policy.Backoff(m.cfg.RetryBase, s.PhaseAttempts))
	return s
}

// workflows reports whether s's candidate changes .github/workflows,
// asking GitHub's implementation once per delivery (and again after a
// restart, which forgets it).
func (m *Machine) workflows(ctx context.Context, s *State) (bool, error) {
	if s.Workflows == workflowsUnknown {
		yes, err := m.gh.TouchesWorkflows(ctx, s.Repo, s.CandidateSHA)
		if err != nil {
			return false, err
		}
		s.Workflows = workflowsNo
		if yes {
			s.Workflows = workflowsYes
		}
	}
	return s.Workflows == workflowsYes, nil
}

// token returns the delivery token of s (with workflows: write when its
// candidate changes a workflow: GitHub refuses an App's push and merge of
// it otherwise), valid for at least tokenMargin.
func (m *Machine) token(ctx context.Context, s *State) (Token, error) {
	wf, err := m.workflows(ctx, s)
	if err != nil {
		return Token{}, err
	}
	return m.cached(ctx, tokenKey{repo: s.Repo, workflows: wf}, func() (Token, error) {
		return m.gh.MintToken(ctx, s.Repo, wf)
	})
}

// runsToken returns the credential for reading repo's runs.
func (m *Machine) runsToken(ctx context.Context, repo Repo) (Token, error) {
	return m.cached(ctx, tokenKey{repo: repo, runs: true}, func() (Token, error) {
		return m.gh.RunsToken(ctx, repo)
	})
}

// cached returns the token under k while it is valid for at least
// tokenMargin, else a fresh one from mint.
func (m *Machine) cached(ctx context.Context, k tokenKey, mint func() (Token, error)) (Token, error) {
	now := m.clock.Now()
	m.mu.Lock()
	t, ok := m.tokens[k]
	m.mu.Unlock()
	if ok && now.Before(t.ExpiresAt.Add(-tokenMargin)) {
		return t, nil
	}
	t, err := mint()
	if err != nil {
		return Token{}, err
	}
	if (t.Secret == nil && !k.runs) || !now.Before(t.ExpiresAt.Add(-tokenMargin)) {
		return Token{}, &Error{Kind: KindTransient}
	}
	m.mu.Lock()
	m.tokens[k] = t
	m.mu.Unlock()
	return t, nil
}

// mutation waits until mutationGap has passed since the previous mutation
// of any delivery, then lets the caller send one.
func (m *Machine) mutation(ctx context.Context) error {
	m.mutMu.Lock()
	defer m.mutMu.Unlock()
	if d := m.lastMut.Add(mutationGap).Sub(m.clock.Now()); d > 0 {
		if err := m.clock.Sleep(ctx, d); err != nil {
			return err
		}
	}
	m.lastMut = m.clock.Now()
	return nil
}

func (m *Machine) push(ctx context.Context, s State) (State, error) {
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, err
	}
	// Nothing holding a secret of the Gate's is ever pushed (DECISIONS 19).
	if err := m.gh.CheckCandidate(ctx, s.Repo, s.CandidateSHA); err != nil {
		return s, err
	}
	if err := m.mutation(ctx); err != nil {
		return s, err
	}
	if err := m.gh.Push(ctx, tok, s.Repo, s.Branch, s.CandidateSHA, s.PushOver); err != nil {
		return s, err
	}
	return m.advance(s, PhasePullRequest), nil
}

// pullRequest adopts the branch's pull request or creates it; a creation
// whose answer was lost (or a concurrent one) is found by the next look.
func (m *Machine) pullRequest(ctx context.Context, s State) (State, error) {
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, err
	}
	pr, found, err := m.gh.FindPullRequest(ctx, tok, s.Repo, s.Branch)
	if err != nil {
		return s, err
	}
	if !found {
		title, body := "Agent Forge job "+s.JobID, prBody(s)
		if m.describe != nil {
			if title, body, err = m.describe(ctx, s); err != nil {
				return s, &Error{Kind: KindTransient}
			}
		}
		if err := m.mutation(ctx); err != nil {
			return s, err
		}
		pr, err = m.gh.CreatePullRequest(ctx, tok, s.Repo, NewPullRequest{
			Title: title,
			Head:  s.Branch,
			Base:  s.BaseBranch,
			Body:  body,
		})
		if err != nil {
			return s, err
		}
	}
	s.PRNumber, s.PRURL = pr.Number, pr.URL
	switch {
	case pr.HeadSHA != s.CandidateSHA:
		return fail(s, CodeHeadMoved), nil
	case pr.BaseRef != s.BaseBranch:
		return fail(s, CodeBaseChanged), nil
	case pr.Merged && pr.MergeCommitSHA == "":
		// Merged, but the answer names no merge commit: read again.
		return s, &Error{Kind: KindTransient}
	case pr.Merged:
		// Merged by a person with the candidate as head: delivered.
		s.MergeSHA = pr.MergeCommitSHA
		return m.advance(s, PhaseMerged), nil
	case pr.State != "open":
		return fail(s, CodePRClosed), nil
	}
	s = m.advance(s, PhaseCI)
	s.CIStartedAt, s.CIState, s.ETag, s.RunsKey, s.RunsVerdict = s.NextAt, CIWaiting, "", "", ""
	return s, nil
}

// prBody is the body of the pull request delivering s: the candidate and
// what its job's attempts spent through the model gateway.
func prBody(s State) string {
	return "Automatic delivery of the Agent Forge candidate " + s.CandidateSHA + ". It is merged once GitHub Actions pass for this exact commit.\n\n" +
		UsageLine(s.Usage)
}

// UsageLine says what a job's attempts spent through the model gateways.
func UsageLine(u *Usage) string {
	if u == nil {
		return "Model usage: not metered (no attempt of this job went through a Worker's model gateway)."
	}
	return fmt.Sprintf("Model usage (all attempts, as the providers reported it): %d requests, %d input tokens (%d cached), %d output tokens.",
		u.Requests, u.InputTokens, u.CachedTokens, u.OutputTokens)
}

// reconcileMerge asks whether s's pull request is merged; done is true
// with the final state when it is.
func (m *Machine) reconcileMerge(ctx context.Context, s State) (State, bool, error) {
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, false, err
	}
	merged, err := m.gh.Merged(ctx, tok, s.Repo, s.PRNumber)
	if err != nil || !merged {
		return s, false, err
	}
	pr, err := m.gh.PullRequest(ctx, tok, s.Repo, s.PRNumber)
	if err != nil {
		return s, false, err
	}
	switch {
	case pr.HeadSHA != s.CandidateSHA:
		return fail(s, CodeHeadMoved), true, nil
	case pr.BaseRef != s.BaseBranch:
		return fail(s, CodeBaseChanged), true, nil
	case pr.MergeCommitSHA == "":
		// Merged, but the answer names no merge commit: read again.
		return s, false, &Error{Kind: KindTransient}
	}
	s.MergeSHA = pr.MergeCommitSHA
	return m.advance(s, PhaseMerged), true, nil
}

// merge merges the pull request at exactly the candidate, after checking
// it is not merged already (a lost answer of an earlier try). After any
// refusal it asks once more whether the pull request is merged, so a
// merge whose first answer was lost is never reported merge_refused.
func (m *Machine) merge(ctx context.Context, s State) (State, error) {
	if next, done, err := m.reconcileMerge(ctx, s); err != nil || done {
		return next, err
	}
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, err
	}
	pr, err := m.gh.PullRequest(ctx, tok, s.Repo, s.PRNumber)
	if err != nil {
		return s, err
	}
	switch {
	case pr.HeadSHA != s.CandidateSHA:
		return fail(s, CodeHeadMoved), nil
	case pr.BaseRef != s.BaseBranch:
		return fail(s, CodeBaseChanged), nil
	case pr.State != "open":
		return fail(s, CodePRClosed), nil
	}
	if err := m.mutation(ctx); err != nil {
		return s, err
	}
	res, err := m.gh.Merge(ctx, tok, s.Repo, s.PRNumber, s.CandidateSHA)
	var e *Error
	switch {
	case err == nil && res.Merged && res.SHA != "":
		s.MergeSHA = res.SHA
		return m.advance(s, PhaseMerged), nil
	case err == nil:
		err = &Error{Kind: KindNotMergeable}
	case !errors.As(err, &e) || (e.Kind != KindNotMergeable && e.Kind != KindHeadMoved):
		return s, err
	}
	if next, done, rerr := m.reconcileMerge(ctx, s); rerr == nil && done {
		return next, nil
	}
	return s, err
}

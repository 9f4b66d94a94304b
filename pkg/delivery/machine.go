package delivery

import (
	"context"
	"errors"
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
	tokens map[Repo]Token

	mutMu   sync.Mutex
	lastMut time.Time

	// pollMu guards nextPoll: the earliest time any delivery may poll the
	// runs list again, so that all of them together keep to the shared
	// unauthenticated budget.
	pollMu   sync.Mutex
	nextPoll time.Time
}

// NewMachine returns a Machine using gh.
func NewMachine(gh GitHub, cfg Config, clock Clock) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{gh: gh, cfg: cfg, clock: clock, tokens: map[Repo]Token{}}, nil
}

// Step runs s's phase once (the caller waits until s.NextAt first) and
// returns the state to commit. The error is only ctx's: the Gate is
// stopping and s must not change.
func (m *Machine) Step(ctx context.Context, s State) (State, error) {
	if s.Phase.Terminal() {
		return s, nil
	}
	now := m.clock.Now()
	if !now.Before(s.StartedAt.Add(m.cfg.Timeout)) {
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
	// No wait outlasts the delivery: the step at the deadline ends it.
	if deadline := s.StartedAt.Add(m.cfg.Timeout); !next.Phase.Terminal() && next.NextAt.After(deadline) {
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
		if s.CIState == CIPending {
			return fail(s, CodeCITimedOut), nil
		}
	case PhasePullRequest:
		// A creation whose answer was lost may have left one: name it
		// for the operator (best effort, nothing is created).
		if tok, err := m.token(ctx, s.Repo); err == nil {
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
	case KindTokenRejected:
		// The cached token is dropped; the retry mints a fresh one.
		m.mu.Lock()
		delete(m.tokens, s.Repo)
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

// token returns a token for repo valid for at least tokenMargin, minting a
// fresh one when the cached one is missing or too close to expiry.
func (m *Machine) token(ctx context.Context, repo Repo) (Token, error) {
	now := m.clock.Now()
	m.mu.Lock()
	t, ok := m.tokens[repo]
	m.mu.Unlock()
	if ok && now.Before(t.ExpiresAt.Add(-tokenMargin)) {
		return t, nil
	}
	t, err := m.gh.MintToken(ctx, repo)
	if err != nil {
		return Token{}, err
	}
	if t.Secret == nil || !now.Before(t.ExpiresAt.Add(-tokenMargin)) {
		return Token{}, &Error{Kind: KindTransient}
	}
	m.mu.Lock()
	m.tokens[repo] = t
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
	tok, err := m.token(ctx, s.Repo)
	if err != nil {
		return s, err
	}
	if err := m.mutation(ctx); err != nil {
		return s, err
	}
	if err := m.gh.Push(ctx, tok, s.Repo, s.Branch, s.CandidateSHA); err != nil {
		return s, err
	}
	return m.advance(s, PhasePullRequest), nil
}

// pullRequest adopts the branch's pull request or creates it; a creation
// whose answer was lost (or a concurrent one) is found by the next look.
func (m *Machine) pullRequest(ctx context.Context, s State) (State, error) {
	tok, err := m.token(ctx, s.Repo)
	if err != nil {
		return s, err
	}
	pr, found, err := m.gh.FindPullRequest(ctx, tok, s.Repo, s.Branch)
	if err != nil {
		return s, err
	}
	if !found {
		if err := m.mutation(ctx); err != nil {
			return s, err
		}
		pr, err = m.gh.CreatePullRequest(ctx, tok, s.Repo, NewPullRequest{
			Title: "Agent Forge job " + s.JobID,
			Head:  s.Branch,
			Base:  s.BaseBranch,
			Body:  "Automatic delivery of the Agent Forge candidate " + s.CandidateSHA + ". It is merged once GitHub Actions pass for this exact commit.",
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
	s.CIStartedAt, s.CIState, s.ETag = s.NextAt, CIWaiting, ""
	return s, nil
}

// ci polls the candidate's Actions runs once and applies DECISIONS 12.
func (m *Machine) ci(ctx context.Context, s State) (State, error) {
	runs, err := m.gh.ListRuns(ctx, s.Repo, s.CandidateSHA, s.ETag)
	if err != nil {
		return s, err
	}
	now := m.clock.Now()
	s.PhaseAttempts = 0
	if !runs.NotModified {
		s.ETag = runs.ETag
		s.CIState = Verdict(s.CandidateSHA, runs)
	}
	switch s.CIState {
	case CISuccess:
		return m.advance(s, PhaseMerge), nil
	case CIFailure:
		return fail(s, CodeCIFailed), nil
	case CIWaiting:
		if !now.Before(s.CIStartedAt.Add(m.cfg.NoRunsGrace)) {
			s.CIState = CINoRuns
			return fail(s, CodeCINoRuns), nil
		}
	}
	s.NextAt = m.reservePoll(runs.Rate, now)
	return s, nil
}

// reservePoll schedules the next runs poll of one delivery: no earlier
// than pollAfter says, and after the polls other deliveries reserved,
// each reservation taking its share (reset time / remaining) of the
// budget every delivery of this Gate spends from.
func (m *Machine) reservePoll(r RateLimit, now time.Time) time.Time {
	at := now.Add(m.pollAfter(r, now))
	var share time.Duration
	if left := r.Reset.Sub(now); r.Limit > 0 && r.Remaining > 0 && left > 0 {
		share = left / time.Duration(r.Remaining)
	}
	m.pollMu.Lock()
	defer m.pollMu.Unlock()
	if m.nextPoll.After(at) {
		at = m.nextPoll
	}
	m.nextPoll = at.Add(share)
	return at
}

// pollAfter sizes the wait before the next runs poll: poll_interval, but
// never faster than the remaining unauthenticated budget spread evenly
// until its reset, and not before the reset once nothing remains.
func (m *Machine) pollAfter(r RateLimit, now time.Time) time.Duration {
	d := m.cfg.PollInterval
	if r.Limit <= 0 {
		return d
	}
	left := r.Reset.Sub(now)
	if left <= 0 {
		return d
	}
	if r.Remaining <= 0 {
		return max(d, left)
	}
	return max(d, left/time.Duration(r.Remaining))
}

// Verdict is the CI state of DECISIONS 12 for one runs answer: failure
// once any run of the candidate completed with another conclusion than
// success, neutral or skipped; success when at least one run exists and
// every run (all of them listed) completed with one of those; waiting when
// there is none; pending otherwise.
func Verdict(candidate string, runs Runs) string {
	seen, done := 0, true
	for _, r := range runs.Runs {
		if r.HeadSHA != candidate {
			continue
		}
		seen++
		if r.Status != "completed" {
			done = false
			continue
		}
		switch r.Conclusion {
		case "success", "neutral", "skipped":
		default:
			return CIFailure
		}
	}
	switch {
	case seen == 0:
		return CIWaiting
	case done && runs.TotalCount <= len(runs.Runs):
		return CISuccess
	}
	return CIPending
}

// reconcileMerge asks whether s's pull request is merged; done is true
// with the final state when it is.
func (m *Machine) reconcileMerge(ctx context.Context, s State) (State, bool, error) {
	tok, err := m.token(ctx, s.Repo)
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
// it is not merged already (a lost answer of an earlier try).
func (m *Machine) merge(ctx context.Context, s State) (State, error) {
	if next, done, err := m.reconcileMerge(ctx, s); err != nil || done {
		return next, err
	}
	tok, err := m.token(ctx, s.Repo)
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
	if err != nil {
		return s, err
	}
	if !res.Merged || res.SHA == "" {
		return fail(s, CodeMergeRefused), nil
	}
	s.MergeSHA = res.SHA
	return m.advance(s, PhaseMerged), nil
}

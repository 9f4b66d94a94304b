package delivery

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// authReserve is the share of an installation's budget the runs polls
// leave to everything else the same installation spends (pull request
// reads, merges): the polls are paced as if a tenth were not there.
const authReserve = 10

// ci reads the pull request (a person may have closed or merged it) and
// polls the candidate's Actions runs once, then applies DECISIONS 12: a
// failure ends it at once; a success needs the pull request to be at
// least no_runs_grace old (the ci phase started after it existed) and
// the same runs, ids and states, on two consecutive polls (push-event
// runs exist before the pull_request runs do).
func (m *Machine) ci(ctx context.Context, s State) (State, error) {
	next, done, err := m.prDuringCI(ctx, s)
	if err != nil || done {
		return next, err
	}
	s = next
	rt, err := m.runsToken(ctx, s.Repo)
	if err != nil {
		return s, err
	}
	if !rt.Authenticated() {
		// The shared 60 an hour serve the oldest deliveries first.
		if wait, ok := m.admitted(s, m.clock.Now()); !ok {
			s.NextAt, s.PollReserved = wait, false
			return s, nil
		}
	}
	if !s.PollReserved {
		// A first poll (or one after a failure) takes its turn in the
		// budget's queue like every other.
		if at := m.claimPoll(rt, m.clock.Now()); at.After(m.clock.Now()) {
			s.NextAt, s.PollReserved = at, true
			return s, nil
		}
	}
	s.PollReserved = false
	etag := s.ETag
	if s.RunsKey == "" {
		// Nothing to compare a 304 with (a restart forgot it): read all.
		etag = ""
	}
	runs, err := m.gh.ListRuns(ctx, rt, s.Repo, s.CandidateSHA, etag)
	if err != nil {
		return s, err
	}
	now := m.clock.Now()
	s.PhaseAttempts = 0
	stable := runs.NotModified
	if !runs.NotModified {
		key := runsKey(s.CandidateSHA, runs)
		stable = s.RunsKey != "" && key == s.RunsKey
		s.RunsKey, s.RunsVerdict, s.ETag = key, Verdict(s.CandidateSHA, runs), runs.ETag
	}
	graceOver := !now.Before(s.CIStartedAt.Add(m.cfg.NoRunsGrace))
	switch s.RunsVerdict {
	case CIFailure:
		s.CIState = CIFailure
		return fail(s, CodeCIFailed), nil
	case CISuccess:
		if stable && graceOver {
			s.CIState = CISuccess
			if s.Review {
				return m.advance(s, PhaseReview), nil
			}
			return m.advance(s, PhaseMerge), nil
		}
		// Passing so far; confirmed by the next poll.
		s.CIState = CIPending
	case CIWaiting:
		s.CIState = CIWaiting
		if graceOver {
			s.CIState = CINoRuns
			return fail(s, CodeCINoRuns), nil
		}
	default:
		s.CIState = CIPending
	}
	// A 304 of an authorized read cost nothing: it reserves no share.
	s.NextAt = m.reservePoll(rt, runs.Rate, now, !(runs.NotModified && rt.Authenticated()))
	s.PollReserved = true
	return s, nil
}

// defaultShare is a poll's share of a budget not yet seen in any answer:
// none. Until the first answer names the budget, admission lets only one
// unauthenticated delivery poll (admitted), so no burst outruns it.
func defaultShare(Token) time.Duration { return 0 }

// claimPoll gives an unreserved poll its slot on tok's budget: now when
// the budget's queue is free (the next slot moves on by one share), else
// the queue's next slot, reserved for it.
func (m *Machine) claimPoll(tok Token, now time.Time) time.Time {
	m.pollMu.Lock()
	defer m.pollMu.Unlock()
	share, ok := m.share[tok.Budget]
	if !ok {
		share = defaultShare(tok)
	}
	at := now
	if next := m.nextPoll[tok.Budget]; next.After(at) {
		at = next
	}
	m.nextPoll[tok.Budget] = at.Add(share)
	return at
}

// prDuringCI reads s's pull request in the ci phase: closed ends the
// delivery pr_closed, merged by a person with the candidate as head ends
// it merged with that merge commit, another head or base ends it too;
// done is false while it is open as delivered.
func (m *Machine) prDuringCI(ctx context.Context, s State) (State, bool, error) {
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, false, err
	}
	// Conditional: unchanged since the last read (open, as delivered) is
	// a 304, which costs an authorized request nothing.
	pr, tag, same, err := m.gh.PullRequestIfChanged(ctx, tok, s.Repo, s.PRNumber, s.PRETag)
	if err != nil {
		return s, false, err
	}
	if same {
		return s, false, nil
	}
	s.PRETag = tag
	switch {
	case pr.HeadSHA != s.CandidateSHA:
		return fail(s, CodeHeadMoved), true, nil
	case pr.BaseRef != s.BaseBranch:
		return fail(s, CodeBaseChanged), true, nil
	case pr.Merged && pr.MergeCommitSHA == "":
		return s, false, &Error{Kind: KindTransient}
	case pr.Merged:
		s.MergeSHA = pr.MergeCommitSHA
		return m.advance(s, PhaseMerged), true, nil
	case pr.State != "open":
		return fail(s, CodePRClosed), true, nil
	}
	return s, false, nil
}

// mergedByPerson reports (best effort, nothing is sent but reads) whether
// s's pull request was merged with the candidate as head into its base.
func (m *Machine) mergedByPerson(ctx context.Context, s State) (State, bool) {
	if s.PRNumber == 0 {
		return s, false
	}
	tok, err := m.token(ctx, &s)
	if err != nil {
		return s, false
	}
	pr, err := m.gh.PullRequest(ctx, tok, s.Repo, s.PRNumber)
	if err != nil || !pr.Merged || pr.HeadSHA != s.CandidateSHA || pr.BaseRef != s.BaseBranch || pr.MergeCommitSHA == "" {
		return s, false
	}
	s.MergeSHA = pr.MergeCommitSHA
	return m.advance(s, PhaseMerged), true
}

// runsKey is the set of the candidate's runs of one answer, ids and
// states, in a fixed order, with the count GitHub announced.
func runsKey(candidate string, runs Runs) string {
	var parts []string
	for _, r := range runs.Runs {
		if r.HeadSHA == candidate {
			parts = append(parts, strconv.FormatInt(r.ID, 10)+":"+r.Status+":"+r.Conclusion)
		}
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	return strconv.Itoa(runs.TotalCount) + "|" + strings.Join(parts, ",")
}

// reservePoll schedules the next runs poll of one delivery: no earlier
// than pollAfter says, and after the polls other deliveries reserved on
// the same budget, each poll that counted (paid) taking its share (reset
// time / what remains of it) of the budget.
func (m *Machine) reservePoll(tok Token, r RateLimit, now time.Time, paid bool) time.Time {
	remaining := usable(tok, r)
	at := now.Add(m.pollAfter(r, remaining, now))
	var share time.Duration
	if left := r.Reset.Sub(now); paid && r.Limit > 0 && remaining > 0 && left > 0 {
		share = left / time.Duration(remaining)
	}
	m.pollMu.Lock()
	defer m.pollMu.Unlock()
	if paid {
		m.share[tok.Budget] = share
	}
	if r.Limit > 0 {
		m.rate[tok.Budget] = r
	}
	if next := m.nextPoll[tok.Budget]; next.After(at) {
		at = next
	}
	m.nextPoll[tok.Budget] = at.Add(share)
	return at
}

// paced is the credential of Pace's reservations: an authenticated reader
// of the named budget (no secret is held).
type paced struct{}

// Pace schedules the next read of another poller on budget (the Gate's
// intake feeds, DECISIONS 17) in the same queue as the runs polls of that
// budget: no earlier than poll_interval, the usable budget spread evenly
// until its reset, and after the reads reserved before it; a read that
// counted (paid; a 304 does not) takes its share.
func (m *Machine) Pace(budget string, r RateLimit, paid bool) time.Time {
	return m.reservePoll(Token{Secret: paced{}, Budget: budget}, r, m.clock.Now(), paid)
}

// usable is what the runs polls may spend of the budget r describes: all
// of the unauthenticated one (nothing else of the Gate uses it), an
// installation's less authReserve of its limit.
func usable(tok Token, r RateLimit) int {
	if !tok.Authenticated() {
		return r.Remaining
	}
	return r.Remaining - r.Limit/authReserve
}

// pollAfter sizes the wait before the next runs poll: poll_interval, but
// never faster than the usable budget spread evenly until its reset, and
// not before the reset once nothing usable remains.
func (m *Machine) pollAfter(r RateLimit, remaining int, now time.Time) time.Duration {
	d := m.cfg.PollInterval
	if r.Limit <= 0 {
		return d
	}
	left := r.Reset.Sub(now)
	if left <= 0 {
		return d
	}
	if remaining <= 0 {
		return max(d, left)
	}
	return max(d, left/time.Duration(remaining))
}

// Verdict is the CI state of DECISIONS 12 for one runs answer: failure
// once any run of the candidate completed with another conclusion than
// success, neutral or skipped; success when at least one run exists and
// every run (all of them listed) completed with one of those; waiting when
// there is none; pending otherwise. (The machine also needs the success
// twice and the pull request old enough; see ci.)
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

// admitted decides whether s may poll the unauthenticated budget now.
// Sharing 60 requests an hour evenly among many deliveries would give
// each a poll every hour or so and finish none of them: instead only as
// many deliveries poll as the budget serves at poll_interval (at least
// one), the oldest in ci first (by the start of their ci phase, then
// job), and the others wait, without a request, until one leaves ci. wait
// is when to ask again.
func (m *Machine) admitted(s State, now time.Time) (time.Time, bool) {
	m.pollMu.Lock()
	defer m.pollMu.Unlock()
	m.waiting[s.JobID] = s.CIStartedAt
	capacity := 1
	if r, ok := m.rate[""]; ok {
		if left := r.Reset.Sub(now); left > 0 && r.Remaining > 0 {
			capacity = max(1, int(time.Duration(r.Remaining)*m.cfg.PollInterval/left))
		}
	}
	older := 0
	for job, start := range m.waiting {
		if start.Before(s.CIStartedAt) || start.Equal(s.CIStartedAt) && job < s.JobID {
			older++
		}
	}
	if older < capacity {
		return now, true
	}
	share, ok := m.share[""]
	if !ok {
		share = defaultShare(Token{})
	}
	return now.Add(max(m.cfg.PollInterval, share)), false
}

// leaveCI forgets a delivery that left the ci phase.
func (m *Machine) leaveCI(job string) {
	m.pollMu.Lock()
	delete(m.waiting, job)
	m.pollMu.Unlock()
}

// Budget is the last reading of one rate-limit budget the runs polls
// spend (DECISIONS 16): Name is Token.Budget ("" unauthenticated).
type Budget struct {
	Name string
	Rate RateLimit
}

// Budgets returns the last reading of every budget an answer named, by
// name (the Gate's metrics).
func (m *Machine) Budgets() []Budget {
	m.pollMu.Lock()
	out := make([]Budget, 0, len(m.rate))
	for name, r := range m.rate {
		out = append(out, Budget{name, r})
	}
	m.pollMu.Unlock()
	slices.SortFunc(out, func(a, b Budget) int { return strings.Compare(a.Name, b.Name) })
	return out
}

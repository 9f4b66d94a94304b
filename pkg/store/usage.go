package store

import "github.com/0k-lab/agent-forge/pkg/policy"

// Model gateway usage and budgets (DECISIONS 19). A Worker reports an
// attempt's usage with its result (Outcome.Usage), stored in the
// attempt's usage_* columns (NULL: not metered). A job's policy may carry
// a budget; each lease of it carries the attempt's part (Lease.Budget):
// the per-attempt limit, lowered to what the job's earlier attempts left
// of the per-job limit. Only reported usage counts: a metering lane
// reports it with every heartbeat (HeartbeatUsage) and with the result,
// so an attempt that expired or was cancelled counts what it had spent
// at its last heartbeat.

// budgetFacts are a policy's budget limits (0: unbounded).
type budgetFacts struct {
	attemptTokens, attemptRequests int64
	jobTokens, jobRequests         int64
}

func budgetFactsOf(b *policy.Budget) budgetFacts {
	if b == nil {
		return budgetFacts{}
	}
	return budgetFacts{
		attemptTokens: b.Attempt.Tokens(), attemptRequests: b.Attempt.Requests(),
		jobTokens: b.Job.Tokens(), jobRequests: b.Job.Requests(),
	}
}

func (b budgetFacts) bounded() bool {
	return b.attemptTokens > 0 || b.attemptRequests > 0 || b.jobTokens > 0 || b.jobRequests > 0
}

// leaseBudget computes the budget of the next attempt of job seq.
func (t *wtx) leaseBudget(seq int64, b budgetFacts) (*Budget, error) {
	var usedTokens, usedRequests int64
	if b.jobTokens > 0 || b.jobRequests > 0 {
		if err := t.queryRow(`SELECT coalesce(sum(usage_input_tokens + usage_output_tokens), 0), coalesce(sum(usage_requests), 0)
FROM attempts WHERE job_seq = ?`, seq).Scan(&usedTokens, &usedRequests); err != nil {
			return nil, err
		}
	}
	return &Budget{
		MaxTokens:   part(b.attemptTokens, b.jobTokens, usedTokens),
		MaxRequests: part(b.attemptRequests, b.jobRequests, usedRequests),
	}, nil
}

// part is one dimension of an attempt's budget: nil when both limits are
// unbounded, else the smaller of the attempt's limit and what is left of
// the job's (never below 0).
func part(attempt, job, used int64) *int64 {
	if attempt == 0 && job == 0 {
		return nil
	}
	v := attempt
	if job > 0 {
		left := max(job-used, 0)
		if v == 0 || left < v {
			v = left
		}
	}
	return &v
}

// usageSet raises an attempt's usage columns to usageArgs' counts
// (never lowering one a heartbeat recorded); NULL arguments (nothing
// reported) leave them as they are. SQLite's max() of a NULL is NULL.
const usageSet = `usage_requests = coalesce(max(coalesce(usage_requests, 0), ?), usage_requests),
  usage_input_tokens = coalesce(max(coalesce(usage_input_tokens, 0), ?), usage_input_tokens),
  usage_output_tokens = coalesce(max(coalesce(usage_output_tokens, 0), ?), usage_output_tokens),
  usage_cached_tokens = coalesce(max(coalesce(usage_cached_tokens, 0), ?), usage_cached_tokens)`

func usageArgs(u *Usage) []any {
	if u == nil {
		return []any{nil, nil, nil, nil}
	}
	return []any{u.Requests, u.InputTokens, u.OutputTokens, u.CachedTokens}
}

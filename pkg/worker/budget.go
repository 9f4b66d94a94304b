package worker

import (
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Usage and budgets (DECISIONS 19). A Worker that serves a model gateway
// offers wire.UsageV1 in its hello; on a lease that selects it, the
// attempt's grant enforces the lease's budget (what the Gate computed
// from the policy's per-attempt and per-job limits), and the result
// carries the grant's usage. The gateway refuses a request past the
// budget (403 budget_exceeded, which the agent sees); the lane then
// stops the attempt and reports budget_exceeded (terminal). A policy
// with a budget on a lease the gateway does not meter, or whose budget
// does not bound what the policy bounds, is refused
// (policy_exceeds_ceiling): a budget is never silently unenforced.

// usageOffer is what a lane offers in hello.usage_versions.
func (w *Worker) usageOffer() []string {
	if w.opt.Gateway == nil {
		return nil
	}
	return []string{wire.UsageV1}
}

// leaseBudgetCode refuses, before anything runs, a lease that selects a
// usage version this Worker did not offer, one whose budget does not
// enforce its policy's (leaseBudgetMatches), and one whose budget has
// nothing left. A policy that does not decode is left to the executor
// (invalid_policy).
func (w *Worker) leaseBudgetCode(l *wire.Lease) string {
	if l.UsageVersion != "" && (l.UsageVersion != wire.UsageV1 || w.opt.Gateway == nil) {
		return CodePolicyExceedsCeiling
	}
	if pol, err := policy.Decode(l.Policy); err == nil && !leaseBudgetMatches(pol.Budget, l) {
		return CodePolicyExceedsCeiling
	}
	if b := l.Budget; b != nil && ((b.MaxTokens != nil && *b.MaxTokens == 0) || (b.MaxRequests != nil && *b.MaxRequests == 0)) {
		return CodeBudgetExceeded
	}
	return ""
}

// leaseBudgetMatches reports whether the lease's budget is what the
// Gate derives from the policy's (pb, nil: none): none without a policy
// budget; with one, a metered lease whose budget bounds exactly the
// dimensions the policy bounds, each at most the smaller of the policy's
// attempt and job limits. The Gate is trusted with what the job's
// earlier attempts left, never with dropping a limit.
func leaseBudgetMatches(pb *policy.Budget, l *wire.Lease) bool {
	if pb == nil {
		return l.Budget == nil
	}
	if l.UsageVersion != wire.UsageV1 || l.Budget == nil {
		return false
	}
	return dimensionMatches(l.Budget.MaxTokens, pb.Attempt.Tokens(), pb.Job.Tokens()) &&
		dimensionMatches(l.Budget.MaxRequests, pb.Attempt.Requests(), pb.Job.Requests())
}

// dimensionMatches: v is nil when both limits are unbounded (0), else at
// most the smaller bounded one.
func dimensionMatches(v *int64, attempt, job int64) bool {
	if attempt == 0 && job == 0 {
		return v == nil
	}
	most := attempt
	if most == 0 || (job > 0 && job < most) {
		most = job
	}
	return v != nil && *v <= most
}

// grantBudget is the gateway budget of a lease (unbounded without one).
func grantBudget(l *wire.Lease) gateway.Budget {
	var b gateway.Budget
	if l.UsageVersion != wire.UsageV1 || l.Budget == nil {
		return b
	}
	if v := l.Budget.MaxTokens; v != nil {
		b.MaxTokens = *v
	}
	if v := l.Budget.MaxRequests; v != nil {
		b.MaxRequests = *v
	}
	return b
}

// metered reports whether the attempt's grant enforces its lease's
// budget (a may be nil: a job prepared without an attempt).
func (a *Attempt) metered() bool {
	return a != nil && a.Grant != nil && a.Lease.UsageVersion == wire.UsageV1
}

// wireUsage is a grant's usage as a result carries it (zero without a
// grant).
func wireUsage(gr *gateway.Grant) *wire.Usage {
	var u gateway.Usage
	if gr != nil {
		u = gr.Usage()
	}
	return &wire.Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
}

package wire

import "github.com/0k-lab/agent-forge/pkg/activity"

// UsageV1 is the one version of gateway usage and budgets: a lane that
// serves a model gateway offers it in hello.usage_versions; Gate selects
// it in a lease's usage_version, may then bound the attempt with
// lease.budget, and the Worker returns the attempt's usage with its
// result (DECISIONS 19).
const UsageV1 = "gateway_usage/v1"

// MaxUsage bounds every count in a budget or a usage report (2^53: exact
// in every JSON reader).
const MaxUsage = 1 << 53

// Budget is what one attempt may still spend through the gateway: the
// smaller of the policy's per-attempt limit and what the job's earlier
// attempts left of its per-job limit. A nil field is unbounded; 0 means
// nothing is left (the Worker fails the attempt budget_exceeded before
// running it).
type Budget struct {
	MaxTokens   *int64 `json:"max_tokens,omitempty"`
	MaxRequests *int64 `json:"max_requests,omitempty"`
}

// Usage is what one attempt spent through the gateway, as the providers
// reported it: requests forwarded, input tokens (cached ones included),
// output tokens and the cached part of the input.
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
}

// SelectUsage returns UsageV1 when offer holds it, else "".
func SelectUsage(offer []string) string {
	for _, v := range offer {
		if v == UsageV1 {
			return UsageV1
		}
	}
	return ""
}

func validUsageOffer(offer []string) bool { return activity.ValidOffer(offer) == nil }

func (b *Budget) validate() error {
	for _, v := range []*int64{b.MaxTokens, b.MaxRequests} {
		if v != nil && (*v < 0 || *v > MaxUsage) {
			return fieldErr("lease.budget", "limits must be 0 to 2^53")
		}
	}
	if b.MaxTokens == nil && b.MaxRequests == nil {
		return fieldErr("lease.budget", "names no limit")
	}
	return nil
}

func (u *Usage) validate(field string) error {
	for _, v := range []int64{u.Requests, u.InputTokens, u.OutputTokens, u.CachedTokens} {
		if v < 0 || v > MaxUsage {
			return fieldErr(field, "counts must be 0 to 2^53")
		}
	}
	return nil
}

package policy

import (
	"errors"
	"fmt"
)

// MaxBudget bounds every budget limit (requests or tokens).
const MaxBudget = 1 << 50

// Budget bounds what a job's attempts may spend through the Worker's
// model gateway (DECISIONS 19): Attempt bounds each attempt, Job all of
// a job's attempts together (the Gate leases each attempt the part of
// it the earlier attempts left). A nil part, or a nil limit in it, is
// unbounded.
type Budget struct {
	Attempt *Limits `json:"attempt,omitempty"`
	Job     *Limits `json:"job,omitempty"`
}

// Limits are the two budget dimensions. MaxTokens counts input plus
// output tokens as the provider reported them; cached input tokens are
// input tokens and count like the others.
type Limits struct {
	MaxTokens   *int64 `json:"max_tokens,omitempty"`
	MaxRequests *int64 `json:"max_requests,omitempty"`
}

// Validate checks b: each part present names at least one limit, each
// limit is 1..MaxBudget. Errors name the field, never its value.
func (b *Budget) Validate() error {
	if b == nil {
		return nil
	}
	if b.Attempt == nil && b.Job == nil {
		return errors.New("budget names neither attempt nor job")
	}
	if err := b.Attempt.validate("budget.attempt"); err != nil {
		return err
	}
	return b.Job.validate("budget.job")
}

func (l *Limits) validate(name string) error {
	if l == nil {
		return nil
	}
	if l.MaxTokens == nil && l.MaxRequests == nil {
		return errors.New(name + " names neither max_tokens nor max_requests")
	}
	for _, c := range []struct {
		field string
		v     *int64
	}{{"max_tokens", l.MaxTokens}, {"max_requests", l.MaxRequests}} {
		if c.v != nil && (*c.v < 1 || *c.v > MaxBudget) {
			return fmt.Errorf("%s.%s out of range (1..%d)", name, c.field, int64(MaxBudget))
		}
	}
	return nil
}

// Tokens returns the token limit, 0 when unbounded (l may be nil).
func (l *Limits) Tokens() int64 { return limit(l, func(l *Limits) *int64 { return l.MaxTokens }) }

// Requests returns the request limit, 0 when unbounded (l may be nil).
func (l *Limits) Requests() int64 { return limit(l, func(l *Limits) *int64 { return l.MaxRequests }) }

func limit(l *Limits, f func(*Limits) *int64) int64 {
	if l == nil || f(l) == nil {
		return 0
	}
	return *f(l)
}

// Clone returns a deep copy of b (nil for nil).
func (b *Budget) Clone() *Budget {
	if b == nil {
		return nil
	}
	return &Budget{Attempt: b.Attempt.clone(), Job: b.Job.clone()}
}

func (l *Limits) clone() *Limits {
	if l == nil {
		return nil
	}
	c := Limits{}
	if l.MaxTokens != nil {
		v := *l.MaxTokens
		c.MaxTokens = &v
	}
	if l.MaxRequests != nil {
		v := *l.MaxRequests
		c.MaxRequests = &v
	}
	return &c
}

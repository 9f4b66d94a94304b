package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/0k-lab/agent-forge/pkg/egress"
	"slices"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Schema is the value of the canonical document's "schema" field.
const Schema = "forge-policy/v1"

// BackoffExponentialV1 names the only retry schedule: see Backoff.
const BackoffExponentialV1 = "exponential-v1"

// MaxBackoff caps every retry delay.
const MaxBackoff = 24 * time.Hour

// Bounds checked by Validate.
const (
	MaxEnvironment    = 64
	MinTimeout        = Duration(time.Millisecond)
	MaxTimeout        = Duration(24 * time.Hour)
	MaxOutputBytes    = 64 << 20
	MinLeaseTTL       = Duration(10 * time.Millisecond)
	MaxLeaseTTL       = Duration(24 * time.Hour)
	MinRetryBase      = Duration(time.Millisecond)
	MaxRetryBase      = Duration(24 * time.Hour)
	MaxMaxAttempts    = 100
	MaxCanonicalBytes = 16 << 10
)

// Execution is the portable execution policy a Worker applies to one job.
type Execution struct {
	PluginID          string   `json:"plugin_id"`
	Environment       []string `json:"environment"`
	PluginTimeout     Duration `json:"plugin_timeout"`
	CheckTimeout      Duration `json:"check_timeout"`
	GitTimeout        Duration `json:"git_timeout"`
	CleanupTimeout    Duration `json:"cleanup_timeout"`
	PluginOutputBytes int64    `json:"plugin_output_bytes"`
	CheckOutputBytes  int64    `json:"check_output_bytes"`
	GitOutputBytes    int64    `json:"git_output_bytes"`
	// NetworkAllow are the host:port pairs (a package registry) the
	// attempt's plugin, and with NetworkChecks its scoped checks, may
	// reach through the Worker's CONNECT proxy (pkg/egress); none: no
	// network but the Worker's model gateway (DECISIONS 19).
	NetworkAllow  []string `json:"network_allow,omitempty"`
	NetworkChecks bool     `json:"network_checks,omitempty"`
}

// Lifecycle is the configured lease and retry policy.
type Lifecycle struct {
	LeaseTTL    Duration `json:"lease_ttl"`
	RetryBase   Duration `json:"retry_base"`
	MaxAttempts int      `json:"max_attempts"`
}

// ResolvedLifecycle is Lifecycle with its backoff schedule named, as it
// appears in a Policy.
type ResolvedLifecycle struct {
	Backoff     string   `json:"backoff"`
	LeaseTTL    Duration `json:"lease_ttl"`
	RetryBase   Duration `json:"retry_base"`
	MaxAttempts int      `json:"max_attempts"`
}

// Policy is the resolved document persisted on a job and its attempts.
type Policy struct {
	Schema    string            `json:"schema"`
	Lifecycle ResolvedLifecycle `json:"lifecycle"`
	Execution Execution         `json:"execution"`
	// Budget is the repository's model budget (nil: none). Absent from
	// the canonical document when nil, so a policy without one has the
	// bytes it had before budgets existed.
	Budget *Budget `json:"budget,omitempty"`
}

func checkDuration(name string, d, lo, hi Duration) error {
	if d < lo || d > hi {
		return fmt.Errorf("%s out of range (%v..%v)", name, lo.Std(), hi.Std())
	}
	return nil
}

func checkBytes(name string, n int64) error {
	if n < 1 || n > MaxOutputBytes {
		return fmt.Errorf("%s out of range (1..%d)", name, MaxOutputBytes)
	}
	return nil
}

// Validate checks e against the bounds in the package documentation. Errors
// name the field, never its value.
func (e Execution) Validate() error {
	if !ident.ValidID(e.PluginID) {
		return errors.New("plugin_id is not a safe identifier")
	}
	if len(e.Environment) > MaxEnvironment {
		return fmt.Errorf("environment has more than %d names", MaxEnvironment)
	}
	seen := make(map[string]struct{}, len(e.Environment))
	for i, name := range e.Environment {
		if !ident.ValidEnvName(name) {
			return fmt.Errorf("environment[%d] is not a valid variable name", i)
		}
		if _, dup := seen[name]; dup {
			return fmt.Errorf("environment[%d] is a duplicate", i)
		}
		seen[name] = struct{}{}
	}
	for _, c := range []struct {
		name string
		d    Duration
	}{
		{"plugin_timeout", e.PluginTimeout},
		{"check_timeout", e.CheckTimeout},
		{"git_timeout", e.GitTimeout},
		{"cleanup_timeout", e.CleanupTimeout},
	} {
		if err := checkDuration(c.name, c.d, MinTimeout, MaxTimeout); err != nil {
			return err
		}
	}
	if err := checkBytes("plugin_output_bytes", e.PluginOutputBytes); err != nil {
		return err
	}
	if err := checkBytes("check_output_bytes", e.CheckOutputBytes); err != nil {
		return err
	}
	if err := checkBytes("git_output_bytes", e.GitOutputBytes); err != nil {
		return err
	}
	if _, err := egress.ParseAllow(e.NetworkAllow); err != nil {
		return err
	}
	if e.NetworkChecks && len(e.NetworkAllow) == 0 {
		return errors.New("network_checks without network_allow")
	}
	return nil
}

// Validate checks l against the bounds in the package documentation.
func (l Lifecycle) Validate() error {
	if err := checkDuration("lease_ttl", l.LeaseTTL, MinLeaseTTL, MaxLeaseTTL); err != nil {
		return err
	}
	if err := checkDuration("retry_base", l.RetryBase, MinRetryBase, MaxRetryBase); err != nil {
		return err
	}
	if l.MaxAttempts < 1 || l.MaxAttempts > MaxMaxAttempts {
		return fmt.Errorf("max_attempts out of range (1..%d)", MaxMaxAttempts)
	}
	return nil
}

// Validate checks every field of p, including the schema and backoff names.
func (p Policy) Validate() error {
	if p.Schema != Schema {
		return errors.New("policy schema is not " + Schema)
	}
	if p.Lifecycle.Backoff != BackoffExponentialV1 {
		return errors.New("policy backoff is not " + BackoffExponentialV1)
	}
	if err := p.Lifecycle.Lifecycle().Validate(); err != nil {
		return fmt.Errorf("policy lifecycle: %w", err)
	}
	if err := p.Execution.Validate(); err != nil {
		return fmt.Errorf("policy execution: %w", err)
	}
	if err := p.Budget.Validate(); err != nil {
		return fmt.Errorf("policy %w", err)
	}
	return nil
}

// Lifecycle returns r without its backoff name.
func (r ResolvedLifecycle) Lifecycle() Lifecycle {
	return Lifecycle{LeaseTTL: r.LeaseTTL, RetryBase: r.RetryBase, MaxAttempts: r.MaxAttempts}
}

// Resolve combines a lifecycle and an execution policy into the document
// persisted on a job. The environment list is copied and sorted; inputs are
// not modified. Validate the result (or the inputs) before persisting it.
func Resolve(l Lifecycle, e Execution) Policy {
	env := make([]string, len(e.Environment))
	copy(env, e.Environment)
	slices.Sort(env)
	e.Environment = env
	if len(e.NetworkAllow) > 0 {
		e.NetworkAllow = slices.Sorted(slices.Values(e.NetworkAllow))
	}
	return Policy{
		Schema: Schema,
		Lifecycle: ResolvedLifecycle{
			Backoff:     BackoffExponentialV1,
			LeaseTTL:    l.LeaseTTL,
			RetryBase:   l.RetryBase,
			MaxAttempts: l.MaxAttempts,
		},
		Execution: e,
	}
}

// Canonical returns the deterministic JSON encoding of p: fixed field order,
// no insignificant whitespace, an empty environment written as [].
func (p Policy) Canonical() []byte {
	if p.Execution.Environment == nil {
		p.Execution.Environment = []string{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		// Every field is a string, integer or TextMarshaler that cannot fail.
		panic("policy: canonical encoding failed: " + err.Error())
	}
	return b
}

// Decode strictly decodes a policy document (unknown, duplicate or
// case-variant keys, nulls and trailing data are rejected) and validates it.
// It does not require the canonical byte form; Canonical of the result is.
func Decode(data []byte) (Policy, error) {
	if len(data) > MaxCanonicalBytes {
		return Policy{}, errors.New("policy document too large")
	}
	var p Policy
	if err := strictjson.Decode(data, &p); err != nil {
		return Policy{}, fmt.Errorf("decode policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	if p.Execution.Environment == nil {
		p.Execution.Environment = []string{}
	}
	return p, nil
}

// Backoff returns the exponential-v1 delay before the retry that follows
// attempt ordinal: min(retryBase * 2^(ordinal-1), MaxBackoff). It saturates
// instead of overflowing; ordinals below 1 count as 1 and a non-positive
// base yields 0.
func Backoff(retryBase time.Duration, ordinal int) time.Duration {
	if retryBase <= 0 {
		return 0
	}
	d := min(retryBase, MaxBackoff)
	for i := 1; i < ordinal; i++ {
		if d >= MaxBackoff/2 {
			return MaxBackoff
		}
		d *= 2
	}
	return d
}

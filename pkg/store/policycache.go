package store

import (
	"bytes"
	"sync"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

// policyFacts are the columns a job derives from its canonical policy.
type policyFacts struct {
	pluginID    string
	leaseTTL    int64 // microseconds
	retryBase   int64 // microseconds
	maxAttempts int
	budget      budgetFacts
}

// policyCache remembers decoded policies by their exact bytes. A Gate
// submits a handful of distinct policies (the default and one per
// repository), so strict decoding runs once per document instead of once
// per job. It is bounded: when full it starts over.
type policyCache struct {
	mu sync.Mutex
	m  map[string]policyFacts
}

const maxCachedPolicies = 256

func (c *policyCache) decode(doc []byte) (policyFacts, error) {
	c.mu.Lock()
	f, ok := c.m[string(doc)]
	c.mu.Unlock()
	if ok {
		return f, nil
	}
	f, err := decodePolicy(doc)
	if err != nil {
		return policyFacts{}, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedPolicies {
		c.m = make(map[string]policyFacts)
	}
	c.m[string(doc)] = f
	c.mu.Unlock()
	return f, nil
}

// decodePolicy strictly decodes canonical policy bytes into the facts a
// job derives from them.
func decodePolicy(doc []byte) (policyFacts, error) {
	p, err := policy.Decode(doc)
	if err != nil {
		return policyFacts{}, invalid("policy does not decode")
	}
	if !bytes.Equal(p.Canonical(), doc) {
		return policyFacts{}, invalid("policy is not canonical")
	}
	return policyFacts{
		pluginID:    p.Execution.PluginID,
		leaseTTL:    p.Lifecycle.LeaseTTL.Std().Microseconds(),
		retryBase:   p.Lifecycle.RetryBase.Std().Microseconds(),
		maxAttempts: p.Lifecycle.MaxAttempts,
		budget:      budgetFactsOf(p.Budget),
	}, nil
}

package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"sync"
)

// CredentialPrefix starts every per-attempt credential.
const CredentialPrefix = "fgw-"

// Budget bounds one grant; zero fields are unbounded.
type Budget struct {
	MaxRequests int64 // requests forwarded
	MaxTokens   int64 // input plus output tokens the provider reported
}

// Usage is what one grant's requests cost, as the providers reported it.
// InputTokens counts every prompt token, CachedTokens the part of them
// read from the provider's cache; OutputTokens includes reasoning.
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.Requests + v.Requests, u.InputTokens + v.InputTokens, u.OutputTokens + v.OutputTokens, u.CachedTokens + v.CachedTokens}
}

// Tokens is the total the token budget counts.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Grant is one attempt's access to the gateway: a random credential
// valid from Issue until Revoke, a budget and the usage so far.
type Grant struct {
	gw     *Gateway
	cred   string
	sum    [32]byte
	budget Budget

	ctx    context.Context // ends at Revoke: in-flight requests stop
	cancel context.CancelFunc

	// slot holds the one request a grant with a token budget may have
	// in flight (nil: no token budget, no bound): a request's cost is
	// known only from its answer, so parallel requests could each spend
	// what is left.
	slot chan struct{}

	mu       sync.Mutex
	usage    Usage
	revoked  bool
	exceeded chan struct{} // closed once the budget is spent or overrun
	overrun  bool
	unread   bool // an answer's usage could not be read (unmetered)
}

// Issue returns a new grant with budget b. Its credential is 32 random
// bytes (hex, after CredentialPrefix); it is accepted, for every
// provider, until Revoke.
func (g *Gateway) Issue(b Budget) *Grant {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("gateway: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	cred := CredentialPrefix + hex.EncodeToString(raw[:])
	ctx, cancel := context.WithCancel(context.Background())
	gr := &Grant{gw: g, cred: cred, sum: sha256.Sum256([]byte(cred)), budget: b, ctx: ctx, cancel: cancel, exceeded: make(chan struct{})}
	if b.MaxTokens > 0 {
		gr.slot = make(chan struct{}, 1)
	}
	g.mu.Lock()
	g.grants[gr.sum] = gr
	g.mu.Unlock()
	return gr
}

// Credential is the value the attempt presents instead of a key.
func (gr *Grant) Credential() string { return gr.cred }

// URL is the gateway's base URL (http://127.0.0.1:PORT): provider id's
// API is under URL + "/" + id.
func (gr *Grant) URL() string { return gr.gw.URL() }

// Revoke ends the grant: its credential is refused from now on and its
// requests still in flight are cut. It is idempotent.
func (gr *Grant) Revoke() {
	gr.gw.mu.Lock()
	if gr.gw.grants[gr.sum] == gr {
		delete(gr.gw.grants, gr.sum)
	}
	gr.gw.mu.Unlock()
	gr.mu.Lock()
	gr.revoked = true
	gr.mu.Unlock()
	gr.cancel()
}

// Usage returns the usage so far.
func (gr *Grant) Usage() Usage {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return gr.usage
}

// Exceeded is closed once the gateway refused one of the grant's
// requests because its budget was spent, or the usage its answers
// reported went past the token budget. From then on every request of the
// grant is refused and those in flight are cut.
func (gr *Grant) Exceeded() <-chan struct{} { return gr.exceeded }

// BudgetExceeded reports whether Exceeded is closed.
func (gr *Grant) BudgetExceeded() bool {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return gr.overrun
}

// admit counts one request against the budget; false refuses it (and
// marks the grant exceeded).
func (gr *Grant) admit() bool {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.revoked {
		return false
	}
	b := gr.budget
	if gr.overrun || (b.MaxRequests > 0 && gr.usage.Requests >= b.MaxRequests) || (b.MaxTokens > 0 && gr.usage.Tokens() >= b.MaxTokens) {
		gr.exceed()
		return false
	}
	gr.usage.Requests++
	return true
}

// record adds one response's token counts; usage past the token budget
// exceeds the grant.
func (gr *Grant) record(u Usage) {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	u.Requests = 0
	gr.usage = gr.usage.Add(u)
	if b := gr.budget; b.MaxTokens > 0 && gr.usage.Tokens() > b.MaxTokens {
		gr.exceed()
	}
}

// unmetered is the end of a request that may have cost tokens but whose
// answer told the meter nothing (cut, its usage past the meter's bounds,
// or none): on a grant with a token budget, whose rest that answer may
// have spent, it exceeds the grant. The answers a Revoke or an earlier
// exceed cut change nothing.
func (gr *Grant) unmetered() {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.budget.MaxTokens > 0 && !gr.revoked && !gr.overrun {
		gr.unread = true
		gr.exceed()
	}
}

// Unmetered reports whether the grant was exceeded by an answer whose
// usage the meter could not read.
func (gr *Grant) Unmetered() bool {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return gr.unread
}

// exceed marks the budget spent (gr.mu held): Exceeded closes and the
// grant's requests in flight are cut.
func (gr *Grant) exceed() {
	if !gr.overrun {
		gr.overrun = true
		close(gr.exceeded)
		gr.cancel()
	}
}

// acquire waits, for a grant with a token budget, until no other request
// of the grant is in flight; false when ctx ended first. release ends
// what acquire began.
func (gr *Grant) acquire(ctx context.Context) bool {
	if gr.slot == nil {
		return true
	}
	select {
	case gr.slot <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (gr *Grant) release() {
	if gr.slot != nil {
		<-gr.slot
	}
}

// lookup returns the live grant whose credential is cred, or nil. The
// map is keyed by the credential's SHA-256, and the credential itself is
// then compared in constant time.
func (g *Gateway) lookup(cred string) *Grant {
	if cred == "" || len(cred) > MaxKeyBytes {
		return nil
	}
	sum := sha256.Sum256([]byte(cred))
	g.mu.Lock()
	gr := g.grants[sum]
	g.mu.Unlock()
	if gr == nil || subtle.ConstantTimeCompare([]byte(gr.cred), []byte(cred)) != 1 {
		return nil
	}
	return gr
}

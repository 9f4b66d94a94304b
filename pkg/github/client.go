package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fixed endpoints. Production talks to nothing else: the only seam is the
// HTTP transport (and, for git, the system's name resolution and CA
// bundle), never a configurable URL.
const (
	APIBase = "https://api.github.com"
	GitBase = "https://github.com"
)

// Client defaults.
const (
	DefaultAttempts     = 4
	DefaultMaxWait      = 5 * time.Minute
	DefaultMutationGap  = time.Second
	DefaultRetryBase    = time.Second
	SecondaryLimitWait  = time.Minute
	MaxResponseBytes    = 4 << 20
	DefaultRequestLimit = 30 * time.Second
	apiVersion          = "2022-11-28"
	userAgent           = "agent-forge"
)

// Client calls GitHub's REST API. Mutations are serialized and spaced by
// MutationGap (GitHub's secondary limits); every call is bounded in time,
// size and retries. The zero value is not usable: use New.
type Client struct {
	http        *http.Client
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error
	attempts    int
	maxWait     time.Duration
	mutationGap time.Duration
	retryBase   time.Duration

	mu           sync.Mutex // held across one mutation and its retries
	lastMutation time.Time
}

// Options tune a Client; zero fields take the defaults.
type Options struct {
	// Sleep waits for d or until ctx ends (default: a timer).
	Sleep func(ctx context.Context, d time.Duration) error
	// Attempts bounds the tries of one call (default DefaultAttempts).
	Attempts int
	// MaxWait is the longest single rate-limit wait honoured; a longer
	// one fails the call as rate_limited (default DefaultMaxWait).
	MaxWait time.Duration
	// MutationGap is the minimum spacing of mutations (default 1 s).
	MutationGap time.Duration
	// RetryBase is the first backoff after a 5xx or transport error.
	RetryBase time.Duration
}

// New returns a Client sending through transport (nil: a fresh
// http.Transport with the system's roots) and reading time from now.
func New(transport http.RoundTripper, now func() time.Time, o Options) *Client {
	if transport == nil {
		transport = &http.Transport{
			Proxy:               nil,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		}
	}
	c := &Client{
		http: &http.Client{
			Transport: transport,
			Timeout:   DefaultRequestLimit,
			// Every route this client uses answers directly; a redirect
			// would carry credentials somewhere unplanned.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: now, sleep: o.Sleep, attempts: o.Attempts, maxWait: o.MaxWait,
		mutationGap: o.MutationGap, retryBase: o.RetryBase,
	}
	if c.sleep == nil {
		c.sleep = sleepContext
	}
	if c.attempts <= 0 {
		c.attempts = DefaultAttempts
	}
	if c.maxWait <= 0 {
		c.maxWait = DefaultMaxWait
	}
	if c.mutationGap <= 0 {
		c.mutationGap = DefaultMutationGap
	}
	if c.retryBase <= 0 {
		c.retryBase = DefaultRetryBase
	}
	return c
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is one API request.
type call struct {
	op     string
	method string
	path   string // already escaped
	query  url.Values
	auth   string // the bearer credential
	// sign, when set, makes a fresh bearer credential (an App JWT) for
	// each attempt: waiting out a limit can outlast one JWT.
	sign   func() (string, error)
	header http.Header // extra request headers (If-None-Match)
	body   any         // JSON-encoded when non-nil
	want   []int       // success statuses
	// mutation: serialized and spaced. retryUncertain: a 5xx or lost
	// response may be retried (the repeat is harmless); otherwise the
	// caller must read state before trying again.
	mutation       bool
	retryUncertain bool
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) do(ctx context.Context, k call) (*response, error) {
	if k.mutation {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	var body []byte
	if k.body != nil {
		b, err := json.Marshal(k.body)
		if err != nil {
			return nil, &APIError{Op: k.op, Class: ClassMalformed}
		}
		body = b
	}
	backoff := c.retryBase
	for attempt := 1; ; attempt++ {
		last := attempt >= c.attempts
		if k.mutation {
			if wait := c.lastMutation.Add(c.mutationGap).Sub(c.now()); wait > 0 {
				if err := c.sleep(ctx, wait); err != nil {
					return nil, &APIError{Op: k.op, Class: ClassTransport}
				}
			}
		}
		if k.sign != nil {
			jwt, err := k.sign()
			if err != nil {
				return nil, &APIError{Op: k.op, Class: ClassMalformed}
			}
			k.auth = jwt
		}
		resp, err := c.send(ctx, k, body)
		if k.mutation {
			c.lastMutation = c.now()
		}
		if errors.Is(err, errTooLarge) {
			// The same request gets the same answer: never retried.
			return nil, &APIError{Op: k.op, Class: ClassTooLarge}
		}
		if err != nil {
			if ctx.Err() != nil || last || !k.retryUncertain {
				return nil, &APIError{Op: k.op, Class: ClassTransport}
			}
			if c.sleep(ctx, backoff) != nil {
				return nil, &APIError{Op: k.op, Class: ClassTransport}
			}
			backoff *= 2
			continue
		}
		for _, w := range k.want {
			if resp.status == w {
				return resp, nil
			}
		}
		msg := errorMessage(resp.body)
		if wait, limited := c.limitWait(resp, msg, backoff); limited {
			// A limited request was not carried out, so even a
			// mutation may be repeated.
			if last || wait > c.maxWait {
				return nil, &APIError{Op: k.op, Status: resp.status, Class: ClassRateLimited, RetryAfter: wait, msg: msg}
			}
			if c.sleep(ctx, wait) != nil {
				return nil, &APIError{Op: k.op, Status: resp.status, Class: ClassRateLimited, msg: msg}
			}
			backoff *= 2
			continue
		}
		if resp.status >= 500 && k.retryUncertain && !last {
			if c.sleep(ctx, backoff) != nil {
				return nil, &APIError{Op: k.op, Status: resp.status, Class: ClassServer, msg: msg}
			}
			backoff *= 2
			continue
		}
		return nil, &APIError{Op: k.op, Status: resp.status, Class: classify(resp.status, msg), msg: msg}
	}
}

func (c *Client) send(ctx context.Context, k call, body []byte) (*response, error) {
	u := APIBase + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", userAgent)
	if k.auth != "" {
		req.Header.Set("Authorization", "Bearer "+k.auth)
	}
	for name, v := range k.header {
		req.Header[name] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxResponseBytes {
		return nil, errTooLarge
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// errTooLarge is an answer longer than MaxResponseBytes.
var errTooLarge = errors.New("response too large")

// limitWait reports whether resp is a rate-limit refusal and how long to
// wait: retry-after when present; else until x-ratelimit-reset when
// x-ratelimit-remaining is 0; else (a secondary limit) at least a minute,
// growing with backoff.
func (c *Client) limitWait(resp *response, msg string, backoff time.Duration) (time.Duration, bool) {
	if resp.status != http.StatusForbidden && resp.status != http.StatusTooManyRequests {
		return 0, false
	}
	if strings.Contains(msg, msgNotAccessible) {
		// A permission refusal: waiting never helps, whatever the headers.
		return 0, false
	}
	remaining := resp.header.Get("X-Ratelimit-Remaining")
	retryAfter := resp.header.Get("Retry-After")
	lower := strings.ToLower(msg)
	if resp.status == http.StatusForbidden && retryAfter == "" && remaining != "0" &&
		!strings.Contains(lower, "rate limit") {
		return 0, false
	}
	if retryAfter != "" {
		if n, err := strconv.ParseInt(retryAfter, 10, 64); err == nil && n >= 0 && n < 1<<31 {
			return time.Duration(n) * time.Second, true
		}
	}
	if remaining == "0" {
		if n, err := strconv.ParseInt(resp.header.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			wait := time.Unix(n, 0).Sub(c.now()) + time.Second
			if wait < time.Second {
				wait = time.Second
			}
			return wait, true
		}
	}
	wait := SecondaryLimitWait
	if b := backoff * 60; b > wait {
		wait = b
	}
	return wait, true
}

// msgNotAccessible is GitHub's 403 text for a missing permission.
const msgNotAccessible = "Resource not accessible by integration"

// classify maps a final non-success status to its class.
func classify(status int, msg string) Class {
	switch {
	case status == http.StatusUnauthorized:
		return ClassUnauthorized
	case status == http.StatusForbidden && strings.Contains(msg, msgNotAccessible):
		return ClassPermission
	case status == http.StatusForbidden:
		return ClassForbidden
	case status == http.StatusNotFound:
		return ClassNotFound
	case status == http.StatusConflict:
		return ClassConflict
	case status == http.StatusUnprocessableEntity:
		return ClassValidation
	case status >= 500:
		return ClassServer
	}
	return ClassUnexpected
}

// maxMessageBytes bounds the private copy of GitHub's error message.
const maxMessageBytes = 2048

// errorMessage extracts GitHub's error message and errors[].message
// from an error body, bounded and redacted; "" when there is none.
// GitHub's errors entries are objects with a message, but some answers
// hold bare strings or nulls; each is read on its own so that one odd
// entry cannot hide the rest.
func errorMessage(body []byte) string {
	var e struct {
		Message json.RawMessage   `json:"message"`
		Errors  []json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	parts := []string{text(e.Message)}
	for i, raw := range e.Errors {
		if i == 8 {
			break
		}
		var x struct {
			Message json.RawMessage `json:"message"`
			Field   json.RawMessage `json:"field"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(raw, &x) == nil {
			// A field error names no message, only the field and its
			// code ("head" "invalid"): keep them as "head invalid".
			if f, c := text(x.Field), text(x.Code); f != "" && c != "" {
				parts = append(parts, f+" "+c)
			}
			parts = append(parts, text(x.Message))
			continue
		}
		parts = append(parts, text(raw))
	}
	s := strings.Join(parts, "\n")
	if len(s) > maxMessageBytes {
		s = s[:maxMessageBytes]
	}
	return Redact(s)
}

// text is the JSON string raw, or "" when raw is anything else.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// decode unmarshals a success body into v (GitHub adds fields and uses
// null freely, so this is a bounded ordinary decode; every field the
// client relies on is validated by the caller).
func decode(op string, r *response, v any) error {
	if json.Unmarshal(r.body, v) != nil {
		return &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return nil
}

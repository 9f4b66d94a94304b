package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

const (
	defaultTokenEnv = "FORGE_OWNER_TOKEN"
	gateURLEnv      = "FORGE_GATE_URL"

	// maxTokenBytes bounds the owner token read from the environment.
	maxTokenBytes = 4096
	// maxResponseBytes bounds every successful Gate response body. An
	// aggregate carries at most a few attempts with bounded evidence.
	maxResponseBytes = 16 << 20
	// maxErrorBytes bounds a Gate error body.
	maxErrorBytes = 64 << 10
	// requestTimeout bounds one HTTP exchange.
	requestTimeout = 60 * time.Second
)

// connFlags are the flags every subcommand shares.
type connFlags struct {
	url      string
	tokenEnv string
}

// client talks to one Gate with the owner token.
type client struct {
	base     string
	token    string
	tokenEnv string
	http     *http.Client
}

// connect validates the connection flags and the token variable and returns
// a client. A bad URL or variable name is a usage error; a missing or
// malformed token is an error. Neither message contains a value.
func (c *command) connect(conn connFlags) (*client, error) {
	raw := conn.url
	if raw == "" {
		raw, _ = c.env(gateURLEnv)
	}
	if raw == "" {
		return nil, &failure{code: ExitUsage, msg: "no Gate URL", hint: "pass -url or set FORGE_GATE_URL"}
	}
	base, err := parseGateURL(raw)
	if err != nil {
		return nil, &failure{code: ExitUsage, msg: "invalid Gate URL: " + err.Error()}
	}
	if !ident.ValidEnvName(conn.tokenEnv) {
		return nil, usageErr("-token-env must name an environment variable ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes)")
	}
	token, ok := c.env(conn.tokenEnv)
	if !ok || token == "" {
		return nil, &failure{code: ExitErr, msg: "environment variable " + conn.tokenEnv + " is not set",
			hint: "export the owner token in " + conn.tokenEnv + " (never pass it as an argument)"}
	}
	if !validToken(token) {
		return nil, fail(ExitErr, "", "environment variable %s does not hold a valid token (1..%d visible ASCII bytes)", conn.tokenEnv, maxTokenBytes)
	}
	return &client{
		base:     base,
		token:    token,
		tokenEnv: conn.tokenEnv,
		http: &http.Client{
			// The owner token must never follow a redirect anywhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// parseGateURL accepts http(s)://host[:port][/prefix] without credentials,
// query or fragment and returns it without a trailing slash.
func parseGateURL(raw string) (string, error) {
	if len(raw) > 2048 {
		return "", errors.New("too long")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("scheme must be http or https")
	case u.Host == "" || u.Opaque != "":
		return "", errors.New("missing host")
	case u.User != nil:
		return "", errors.New("credentials in the URL are not allowed")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("query and fragment are not allowed")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func validToken(s string) bool {
	if s == "" || len(s) > maxTokenBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// do performs one request and strictly decodes a response with status want
// into v. Any other status becomes a failure built from the Gate's error body.
func (cl *client) do(ctx context.Context, method, path string, body []byte, want int, v any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, cl.base+path, rd)
	if err != nil {
		return fail(ExitErr, "", "build request failed")
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return transportFailure(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return cl.statusFailure(resp)
	}
	if err := strictjson.DecodeReader(resp.Body, maxResponseBytes, v); err != nil {
		if errors.Is(err, strictjson.ErrTooLarge) {
			return fail(ExitErr, "", "Gate response exceeds %d bytes", maxResponseBytes)
		}
		var se *strictjson.Error
		if errors.As(err, &se) {
			return fail(ExitErr, "", "invalid Gate response: %v", se)
		}
		return fail(ExitErr, "", "reading the Gate response failed")
	}
	return nil
}

// transportFailure describes a failed exchange without the URL the net/http
// error text would contain.
func transportFailure(ctx context.Context, err error) error {
	hint := "check -url (or FORGE_GATE_URL) and that forge-gate is running"
	var reason string
	var sysErr *os.SyscallError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		reason = "request timed out"
	case errors.Is(ctx.Err(), context.Canceled):
		return &failure{code: ExitErr, msg: "interrupted"}
	case errors.As(err, &dnsErr):
		reason = "host name lookup failed"
	case errors.As(err, &sysErr):
		reason = sysErr.Err.Error()
	default:
		reason = "connection failed"
	}
	return &failure{code: ExitErr, msg: "cannot reach the Gate: " + reason, hint: hint, transient: true}
}

// gateError is the documented error body; phase, reason and retryable
// come with source_failed only.
type gateError struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Phase     string `json:"phase"`
		Reason    string `json:"reason"`
		Retryable *bool  `json:"retryable"`
	} `json:"error"`
}

func (cl *client) statusFailure(resp *http.Response) error {
	transient := resp.StatusCode >= 500
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return &failure{code: ExitErr, msg: fmt.Sprintf("Gate answered HTTP %d; redirects are not followed", resp.StatusCode),
			hint: "point -url at the Gate itself"}
	}
	var ge gateError
	err := strictjson.DecodeReader(resp.Body, maxErrorBytes, &ge)
	// A code is shown only when it cannot be the token echoed back (a
	// lowercase hex token has the shape of a code).
	if err != nil || !ident.ValidCode(ge.Error.Code) || strings.Contains(ge.Error.Code, cl.token) {
		return &failure{code: ExitErr, msg: fmt.Sprintf("Gate answered HTTP %d", resp.StatusCode), transient: transient}
	}
	msg := ge.Error.Code
	// A server that echoes what it was sent (a proxy, the wrong service)
	// must not make the CLI print the token.
	if m := printable(ge.Error.Message, 256); m != "" && !strings.Contains(m, cl.token) {
		msg += ": " + m
	}
	if ident.ValidCode(ge.Error.Phase) && ident.ValidCode(ge.Error.Reason) && ge.Error.Retryable != nil &&
		!strings.Contains(ge.Error.Phase+ge.Error.Reason, cl.token) {
		msg += " (phase " + ge.Error.Phase + ", reason " + ge.Error.Reason
		if *ge.Error.Retryable {
			msg += ", retryable"
		}
		msg += ")"
	}
	f := &failure{code: ExitErr, msg: msg, transient: transient}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		f.hint = "check that " + cl.tokenEnv + " holds the owner token (Worker tokens are refused)"
	case http.StatusNotFound:
		f.hint = "check the job id and -url"
	}
	return f
}

// printable returns s when it is short, single-line printable text and ""
// otherwise; Gate messages are fixed text, anything else is not shown.
func printable(s string, limit int) string {
	if len(s) > limit {
		return ""
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfffd {
			return ""
		}
	}
	return s
}

func invalidResponse(err error) error {
	return fail(ExitErr, "", "invalid Gate response: %v", err)
}

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }

// getJob fetches and checks GET /v1/jobs/{id}.
func (cl *client) getJob(ctx context.Context, id string) (*Job, error) {
	var j Job
	if err := cl.do(ctx, http.MethodGet, jobPath(id), nil, http.StatusOK, &j); err != nil {
		return nil, err
	}
	if err := j.Validate(); err != nil {
		return nil, invalidResponse(err)
	}
	if j.ID != id {
		return nil, invalidResponse(errors.New("job id differs from the requested one"))
	}
	return &j, nil
}

// getEvents fetches and checks GET /v1/jobs/{id}/events.
func (cl *client) getEvents(ctx context.Context, id string) ([]Event, error) {
	var events []Event
	if err := cl.do(ctx, http.MethodGet, jobPath(id)+"/events", nil, http.StatusOK, &events); err != nil {
		return nil, err
	}
	if err := validateEvents(events, ""); err != nil {
		return nil, invalidResponse(err)
	}
	return events, nil
}

// getAggregate fetches and checks GET /v1/jobs/{id}/aggregate.
func (cl *client) getAggregate(ctx context.Context, id string) (*Aggregate, error) {
	var g Aggregate
	if err := cl.do(ctx, http.MethodGet, jobPath(id)+"/aggregate", nil, http.StatusOK, &g); err != nil {
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, invalidResponse(err)
	}
	if g.Job.ID != id {
		return nil, invalidResponse(errors.New("job id differs from the requested one"))
	}
	return &g, nil
}

// submit posts an encoded task and checks the job the Gate created.
func (cl *client) submit(ctx context.Context, task []byte) (*Job, error) {
	var j Job
	if err := cl.do(ctx, http.MethodPost, "/v1/jobs", task, http.StatusCreated, &j); err != nil {
		return nil, err
	}
	if err := j.Validate(); err != nil {
		return nil, invalidResponse(err)
	}
	return &j, nil
}

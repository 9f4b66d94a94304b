package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/providerfake"
)

// upstreamTLS is the fakes' server configuration, whose authority the
// whole test process trusts through SSL_CERT_FILE, as a production
// Worker trusts its providers through the system's roots.
var upstreamTLS *tls.Config

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateway-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ca := filepath.Join(dir, "ca.pem")
	if upstreamTLS, err = providerfake.NewTLS(ca); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("SSL_CERT_FILE", ca)
	os.Unsetenv("SSL_CERT_DIR")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testKey = "sk-real-provider-key-0123456789"

// seen is what the fake upstream received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (s *seen) add(r *http.Request, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	s.body = append(s.body, body)
}

func (s *seen) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the upstream got no request")
	}
	return s.reqs[len(s.reqs)-1], s.body[len(s.body)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// newUpstream starts a TLS fake serving h and recording every request.
func newUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.add(r, string(b))
		if h != nil {
			h(w, r)
		}
	}))
	srv.TLS = upstreamTLS.Clone()
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, s
}

// newGateway serves one provider per (id, kind, upstream base URL).
func newGateway(t *testing.T, ps ...FileProvider) *Gateway {
	t.Helper()
	parsed, err := ParseProviders(ps)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(parsed))
	for i := range keys {
		keys[i] = testKey
	}
	g, err := New(parsed, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func provider(id string, k Kind, base string) FileProvider {
	return FileProvider{ID: id, Kind: string(k), BaseURL: base, KeyEnv: "KEY_" + strings.ToUpper(strings.ReplaceAll(id, "-", "_"))}
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t *testing.T, url, cred, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func TestForwardReplacesTheCredential(t *testing.T) {
	up, s := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "dropped")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, `{"ok":true}`)
	})
	fp := provider("openai", KindOpenAIResponses, up.URL+"/v1")
	fp.Headers = map[string]string{"OpenAI-Organization": "org-forge"}
	g := newGateway(t, fp)
	gr := g.Issue(Budget{})
	defer gr.Revoke()

	req := post(t, ProviderURL(gr.URL(), "openai")+"/responses?stream=true&key=client-key", gr.Credential(), `{"model":"m"}`)
	req.Header.Set("Cookie", "session=client")
	req.Header.Set("Connection", "X-Private")
	req.Header.Set("X-Private", "hop")
	req.Header.Set("X-Api-Key", gr.Credential())
	req.Header.Set("OpenAI-Beta", "responses=v1")
	req.Header.Set("OpenAI-Organization", "client-org")
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusTeapot || body != `{"ok":true}` || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("answer not passed through: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	r, got := s.last(t)
	checks := []struct {
		name string
		ok   bool
	}{
		{"path", r.URL.Path == "/v1/responses"},
		{"query keeps stream, drops key", r.URL.Query().Get("stream") == "true" && !r.URL.Query().Has("key")},
		{"real key as bearer", r.Header.Get("Authorization") == "Bearer "+testKey},
		{"no x-api-key", r.Header.Get("X-Api-Key") == ""},
		{"no cookie", r.Header.Get("Cookie") == ""},
		{"no hop header", r.Header.Get("X-Private") == ""},
		{"end-to-end header kept", r.Header.Get("OpenAI-Beta") == "responses=v1"},
		{"operator header wins", r.Header.Get("OpenAI-Organization") == "org-forge"},
		{"body", got == `{"model":"m"}`},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("upstream request: %s wrong (%v %v)", c.name, r.URL, r.Header)
		}
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, gr.Credential()) {
				t.Errorf("the client's credential was forwarded in %s", k)
			}
		}
	}
}

func TestKeyHeaderPerKind(t *testing.T) {
	up, s := newUpstream(t, nil)
	g := newGateway(t,
		provider("anthropic", KindAnthropicMessages, up.URL),
		provider("gemini", KindGeminiGenerateContent, up.URL+"/v1beta"))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	for _, c := range []struct {
		id, header, path, cred string
	}{
		{"anthropic", "X-Api-Key", "/v1/messages", "X-Api-Key"},
		{"gemini", "X-Goog-Api-Key", "/v1beta/models/g:streamGenerateContent", "X-Goog-Api-Key"},
	} {
		rest := strings.TrimPrefix(c.path, "/v1beta")
		req, _ := http.NewRequest("POST", ProviderURL(gr.URL(), c.id)+rest, strings.NewReader("{}"))
		req.Header.Set(c.cred, gr.Credential())
		if resp, _ := do(t, req); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", c.id, resp.StatusCode)
		}
		r, _ := s.last(t)
		if r.URL.Path != c.path || r.Header.Get(c.header) != testKey || r.Header.Get("Authorization") != "" {
			t.Errorf("%s: upstream got %s %v", c.id, r.URL.Path, r.Header)
		}
	}
}

func TestCredentialLivesWithItsGrant(t *testing.T) {
	up, s := newUpstream(t, nil)
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	a, b := g.Issue(Budget{}), g.Issue(Budget{})
	defer b.Revoke()
	base := ProviderURL(g.URL(), "openai") + "/responses"
	status := func(cred string, set func(*http.Request)) (int, string) {
		req := post(t, base, cred, "{}")
		if set != nil {
			set(req)
		}
		resp, body := do(t, req)
		return resp.StatusCode, body
	}
	if st, _ := status(a.Credential(), nil); st != 200 {
		t.Fatalf("a live credential was refused: %d", st)
	}
	a.Revoke()
	cases := []struct {
		name string
		cred string
		set  func(*http.Request)
	}{
		{"revoked", a.Credential(), nil},
		{"none", "", func(r *http.Request) { r.Header.Del("Authorization") }},
		{"guessed", CredentialPrefix + strings.Repeat("0", 64), nil},
		{"the key itself", testKey, nil},
		{"not bearer", "", func(r *http.Request) { r.Header.Set("Authorization", "Basic "+b.Credential()) }},
		{"prefix of a live one", b.Credential()[:20], nil},
	}
	for _, c := range cases {
		st, body := status(c.cred, c.set)
		if st != http.StatusUnauthorized || !strings.Contains(body, "invalid_credential") {
			t.Errorf("%s: %d %s", c.name, st, body)
		}
		if strings.Contains(body, testKey) || strings.Contains(body, b.Credential()) {
			t.Errorf("%s: the refusal carries a secret", c.name)
		}
	}
	if st, _ := status(b.Credential(), nil); st != 200 {
		t.Errorf("another attempt's live credential stopped working: %d", st)
	}
	if s.count() != 2 {
		t.Errorf("upstream got %d requests, want 2 (refusals must not be forwarded)", s.count())
	}
}

func TestPathsAndProviders(t *testing.T) {
	up, s := newUpstream(t, nil)
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL+"/v1"))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	for _, c := range []struct {
		path string
		want int
	}{
		{"/other/responses", http.StatusNotFound},
		{"/openai/../other", http.StatusBadRequest},
		{"/openai/v1//x", http.StatusBadRequest},
		{"/openai/a%2Fb", http.StatusBadRequest},
		{"/", http.StatusBadRequest},
	} {
		req := post(t, g.URL()+"/x", gr.Credential(), "{}")
		req.URL.Opaque = c.path // sent as written
		if resp, _ := do(t, req); resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
	if s.count() != 0 {
		t.Errorf("a refused path reached the upstream")
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	up, s := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://127.0.0.1:9/elsewhere", http.StatusFound)
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	resp, body := do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "upstream_redirect") || resp.Header.Get("Location") != "" {
		t.Errorf("redirect: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if s.count() != 1 {
		t.Errorf("upstream got %d requests", s.count())
	}
}

func TestUntrustedUpstreamIsRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a server outside the trust roots got the request")
	}))
	defer srv.Close()
	g := newGateway(t, provider("openai", KindOpenAIResponses, srv.URL))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	resp, body := do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "upstream_unreachable") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestRequestBodyIsBounded(t *testing.T) {
	up, _ := newUpstream(t, nil)
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	req := post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "")
	req.Body = io.NopCloser(io.LimitReader(zeros{}, MaxRequestBytes+1))
	req.ContentLength = MaxRequestBytes + 1
	if resp, _ := do(t, req); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("declared length: %d", resp.StatusCode)
	}
	req = post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "")
	req.Body = io.NopCloser(io.LimitReader(zeros{}, MaxRequestBytes+1))
	req.ContentLength = -1 // chunked
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusBadGateway {
			t.Errorf("chunked: %d", resp.StatusCode)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestEventsAreNotBuffered: the first event reaches the client while the
// upstream still holds the second, and the 50 ms gap between them is
// seen by the client.
func TestEventsAreNotBuffered(t *testing.T) {
	const gap = 50 * time.Millisecond
	got1 := make(chan struct{})
	up, _ := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: one\ndata: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		<-got1
		time.Sleep(gap)
		fmt.Fprint(w, "event: two\ndata: {\"n\":2}\n\n")
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	resp, err := http.DefaultTransport.RoundTrip(post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvent := func() string {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if line == "\n" {
				return ev.String()
			}
			ev.WriteString(line)
		}
	}
	if e := readEvent(); !strings.Contains(e, `"n":1`) {
		t.Fatalf("first event %q", e)
	}
	first := time.Now()
	close(got1) // the upstream sends the second event only now
	if e := readEvent(); !strings.Contains(e, `"n":2`) {
		t.Fatalf("second event %q", e)
	}
	if d := time.Since(first); d < gap {
		t.Errorf("the events arrived %v apart, less than the %v gap", d, gap)
	}
}

func TestRevokeCutsAStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up, _ := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	gr := g.Issue(Budget{})
	resp, err := http.DefaultTransport.RoundTrip(post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	gr.Revoke()
	if _, err := io.ReadAll(br); err == nil {
		// A clean end is fine too, as long as the stream ended.
		t.Log("stream ended cleanly after Revoke")
	}
}

func sseBody(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "event: x\ndata: %s\n\n", e)
	}
	return b.String()
}

func TestUsageIsMetered(t *testing.T) {
	cases := []struct {
		name  string
		kind  Kind
		ctype string
		body  string
		want  Usage
	}{
		{"responses sse", KindOpenAIResponses, "text/event-stream", sseBody(
			`{"type":"response.created","response":{"id":"r"}}`,
			`{"type":"response.output_text.delta","delta":"usage is not here"}`,
			`{"type":"response.completed","response":{"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":10}}}}`),
			Usage{InputTokens: 120, OutputTokens: 30, CachedTokens: 100}},
		{"responses json", KindOpenAIResponses, "application/json",
			`{"object":"response","usage":{"input_tokens":7,"output_tokens":3}}`,
			Usage{InputTokens: 7, OutputTokens: 3}},
		{"messages sse", KindAnthropicMessages, "text/event-stream; charset=utf-8", sseBody(
			`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":40,"output_tokens":1}}}`,
			`{"type":"content_block_delta","delta":{"text":"hi"}}`,
			`{"type":"message_delta","usage":{"output_tokens":25}}`),
			Usage{InputTokens: 55, OutputTokens: 25, CachedTokens: 40}},
		{"gemini sse", KindGeminiGenerateContent, "text/event-stream", sseBody(
			`{"candidates":[],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2}}`,
			`{"candidates":[],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":6,"thoughtsTokenCount":4,"cachedContentTokenCount":3}}`),
			Usage{InputTokens: 9, OutputTokens: 10, CachedTokens: 3}},
		{"garbage", KindOpenAIResponses, "text/event-stream", "data: {usage\n\ndata: [DONE]\n\n", Usage{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up, _ := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.ctype)
				// One byte at a time: the meter must not depend on chunking.
				for i := 0; i < len(c.body); i++ {
					io.WriteString(w, c.body[i:i+1])
				}
			})
			g := newGateway(t, provider("p", c.kind, up.URL))
			gr := g.Issue(Budget{})
			defer gr.Revoke()
			resp, body := do(t, post(t, ProviderURL(g.URL(), "p")+"/x", gr.Credential(), "{}"))
			if resp.StatusCode != 200 || body != c.body {
				t.Fatalf("body not passed through: %d", resp.StatusCode)
			}
			c.want.Requests = 1
			if got := gr.Usage(); got != c.want {
				t.Errorf("usage %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	up, s := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"input_tokens":40,"output_tokens":20}}`)
	})
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.URL))
	for _, c := range []struct {
		name    string
		b       Budget
		allowed int
	}{
		{"requests", Budget{MaxRequests: 2}, 2},
		{"tokens", Budget{MaxTokens: 100}, 2}, // 60, then 120 >= 100
		{"unbounded", Budget{}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := s.count()
			gr := g.Issue(c.b)
			defer gr.Revoke()
			for i := 0; i < 4; i++ {
				resp, body := do(t, post(t, ProviderURL(g.URL(), "openai")+"/responses", gr.Credential(), "{}"))
				want := 200
				if i >= c.allowed {
					want = http.StatusForbidden
				}
				if resp.StatusCode != want || (want == 403 && !strings.Contains(body, "budget_exceeded")) {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
				}
			}
			if got := s.count() - before; got != c.allowed {
				t.Errorf("upstream got %d requests, want %d", got, c.allowed)
			}
			exceeded := c.allowed < 4
			select {
			case <-gr.Exceeded():
				if !exceeded {
					t.Error("Exceeded closed without a refusal")
				}
			default:
				if exceeded {
					t.Error("Exceeded not closed after a refusal")
				}
			}
			if u := gr.Usage(); u.Requests != int64(c.allowed) || u.InputTokens != 40*int64(c.allowed) {
				t.Errorf("usage %+v", u)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	g := newGateway(t, provider("a", KindOpenAIResponses, "https://a.example"))
	if s := g.Secrets(); len(s) != 1 || s[0] != testKey {
		t.Errorf("Secrets() = %d values", len(s))
	}
	if _, err := New(nil, []string{"x"}); err == nil {
		t.Error("a key without a provider was accepted")
	}
	p, _ := ParseProviders([]FileProvider{provider("a", KindOpenAIResponses, "https://a.example")})
	if _, err := New(p, []string{"bad key"}); err == nil || strings.Contains(err.Error(), "bad key") {
		t.Errorf("an invalid key: %v", err)
	}
}

func TestListenOnlyOnLoopback(t *testing.T) {
	g, _ := New(nil, nil)
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "192.0.2.1:0"} {
		if err := g.Listen(addr); err == nil {
			g.Close()
			t.Errorf("listened on %s", addr)
		}
	}
	if u, _ := url.Parse(newGateway(t).URL()); u.Hostname() != "127.0.0.1" {
		t.Errorf("URL %s", u)
	}
}

// TestACutUpstreamCutsTheClient: an answer the upstream drops mid-way
// reaches the client as a cut stream (what it already got, then an
// error), never as a clean end it would take for the whole answer.
func TestACutUpstreamCutsTheClient(t *testing.T) {
	up, _ := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	g := newGateway(t, provider("anthropic", KindAnthropicMessages, up.URL))
	gr := g.Issue(Budget{})
	req := post(t, ProviderURL(g.URL(), "anthropic")+"/v1/messages", "", "{}")
	req.Header.Del("Authorization")
	req.Header.Set("X-Api-Key", gr.Credential())
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("a cut upstream ended cleanly after %q", got)
	}
	if string(got) != "event: message_start\ndata: {}\n\n" {
		t.Fatalf("before the cut the client got %q", got)
	}
}

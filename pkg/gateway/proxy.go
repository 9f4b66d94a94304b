package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
)

// The gateway's refusals: a status and a fixed code and text, never a
// value from the request, the key or the upstream.
type refusal struct {
	status  int
	code    string
	message string
}

var (
	errUnknownProvider = refusal{http.StatusNotFound, "unknown_provider", "no provider is served at this path"}
	errBadPath         = refusal{http.StatusBadRequest, "invalid_path", "the request path is not a plain, clean path"}
	errCredential      = refusal{http.StatusUnauthorized, "invalid_credential", "the credential is not valid for a live attempt"}
	errTooLarge        = refusal{http.StatusRequestEntityTooLarge, "request_too_large", "the request body is larger than the gateway forwards"}
	errBudget          = refusal{http.StatusForbidden, "budget_exceeded", "the attempt's model budget is spent"}
	errUpstream        = refusal{http.StatusBadGateway, "upstream_unreachable", "the provider could not be reached"}
	errRedirect        = refusal{http.StatusBadGateway, "upstream_redirect", "the provider answered with a redirect, which the gateway does not follow"}
	errUpgrade         = refusal{http.StatusBadGateway, "upgrade_failed", "the connection upgrade could not be completed"}
	errWebSocket       = refusal{http.StatusForbidden, "websocket_refused", "an attempt with a model budget reaches the provider over HTTP only, not WebSocket"}
)

// refuse answers a request of gr that may not be forwarded: budget_exceeded
// once its budget is spent, else invalid_credential (revoked meanwhile).
func (gr *Grant) refuse(w http.ResponseWriter) {
	if gr.BudgetExceeded() {
		errBudget.write(w)
	} else {
		errCredential.write(w)
	}
}

func (f refusal) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(f.status)
	// Both the OpenAI and the Anthropic error shapes read error.message.
	io.WriteString(w, `{"type":"error","error":{"type":"`+f.code+`","code":"`+f.code+`","message":"`+f.message+`"}}`+"\n")
}

// hopHeaders are the hop-by-hop headers (RFC 9110 7.6.1) plus the
// proxy ones: never forwarded in either direction.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// credentialHeaders carry a client credential: read, then dropped.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"}

// ServeHTTP forwards one request: /ID/REST goes to provider ID's base
// URL + /REST, with the credential checked and replaced by the key.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, rest, ok := splitPath(r.URL)
	if !ok {
		errBadPath.write(w)
		return
	}
	up := g.providers[id]
	if up == nil {
		errUnknownProvider.write(w)
		return
	}
	gr := g.lookup(credentialOf(r))
	if gr == nil {
		errCredential.write(w)
		return
	}
	if r.ContentLength > MaxRequestBytes {
		errTooLarge.write(w)
		return
	}
	upgrade := isWebSocket(r.Header)
	ctx, stop := joinContext(r.Context(), gr.ctx)
	defer stop()
	if !upgrade {
		if !gr.acquire(ctx) {
			gr.refuse(w) // revoked or exceeded while it waited, or the client left
			return
		}
		defer gr.release()
		if !gr.admit() {
			gr.refuse(w)
			return
		}
	}
	out := outbound(ctx, r, up, rest, upgrade)
	if upgrade {
		g.upgrade(w, out, up, gr)
		return
	}
	out.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	if r.ContentLength == 0 {
		out.Body = nil
	}
	// Whether the whole request reached the provider: from then on it may
	// cost tokens whatever becomes of the answer.
	var sent atomic.Bool
	out = out.WithContext(httptrace.WithClientTrace(out.Context(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { sent.Store(i.Err == nil) },
	}))
	costs := costsTokens(up.Kind, r.Method, rest)
	resp, err := g.rt.RoundTrip(out)
	if err != nil {
		if costs && sent.Load() {
			gr.unmetered() // the provider had the request: cut before its answer
		}
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			errTooLarge.write(w)
		} else {
			errUpstream.write(w)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		errRedirect.write(w)
		return
	}
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	m := newMeter(up.Kind, resp.Header.Get("Content-Type"))
	whole, cut := stream(w, resp, m, gr)
	if costs && resp.StatusCode >= 200 && resp.StatusCode < 300 && !(whole && m.seen) {
		gr.unmetered()
	}
	if cut {
		panic(http.ErrAbortHandler)
	}
}

// stream copies the body to w, flushing after every read: each event the
// provider sends leaves as soon as it arrived. The usage a chunk carries
// is recorded before the chunk is passed on, so a client that has read
// the whole answer finds it counted. whole reports that the client got
// the whole answer; cut that the upstream (or a Revoke) cut it short,
// which the caller passes on to the client (http.ErrAbortHandler: no
// clean end of a chunked body), so that an agent retries the stream
// instead of taking its beginning for the whole answer.
func stream(w http.ResponseWriter, resp *http.Response, m *meter, gr *Grant) (whole, cut bool) {
	rc := http.NewResponseController(w)
	buf := make([]byte, copyBuffer)
	var total int64
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			m.Write(buf[:n])
			total += int64(n)
			if err != nil || total == resp.ContentLength {
				m.finish()
			}
			gr.record(m.take())
			if _, werr := w.Write(buf[:n]); werr != nil {
				return false, false
			}
			if rc.Flush() != nil {
				return false, false
			}
		}
		if err != nil {
			m.finish()
			gr.record(m.take())
			return err == io.EOF, err != io.EOF
		}
	}
}

// costsTokens reports whether a request may cost tokens, so that a
// budgeted grant needs its answer's usage: every request other than GET,
// HEAD, OPTIONS and DELETE, except the kinds' token counting endpoints.
func costsTokens(k Kind, method, rest string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete:
		return false
	}
	switch k {
	case KindAnthropicMessages:
		return !strings.HasSuffix(rest, "/messages/count_tokens")
	case KindOpenAIResponses:
		return !strings.HasSuffix(rest, "/responses/input_tokens")
	case KindGeminiGenerateContent:
		return !strings.HasSuffix(rest, ":countTokens")
	}
	return true
}

// splitPath cuts /ID/REST; REST keeps its leading slash. The path must
// be plain (no escapes that change its meaning) and clean.
func splitPath(u *url.URL) (id, rest string, ok bool) {
	p := u.Path
	if u.RawPath != "" || !strings.HasPrefix(p, "/") {
		return "", "", false
	}
	id, rest, _ = strings.Cut(p[1:], "/")
	if id == "" {
		return "", "", false
	}
	if rest != "" {
		rest = "/" + rest
		if path.Clean(rest) != strings.TrimSuffix(rest, "/") && path.Clean(rest) != rest {
			return "", "", false
		}
	}
	return id, rest, true
}

// credentialOf is the credential the client presented: a bearer token,
// else x-api-key, else x-goog-api-key.
func credentialOf(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if v, ok := strings.CutPrefix(a, "Bearer "); ok {
			return v
		}
		return ""
	}
	if v := r.Header.Get("X-Api-Key"); v != "" {
		return v
	}
	return r.Header.Get("X-Goog-Api-Key")
}

// outbound builds the upstream request: the provider's URL, the client's
// end-to-end headers without credentials, cookies or encodings the meter
// could not read, the operator's extra headers and the key.
func outbound(ctx context.Context, r *http.Request, up *upstream, rest string, upgrade bool) *http.Request {
	u := *up.BaseURL
	u.Path = up.BaseURL.Path + rest
	u.RawQuery = stripKeyParam(r.URL.RawQuery)
	h := make(http.Header, len(r.Header)+len(up.Headers)+1)
	copyHeaders(h, r.Header)
	for _, k := range credentialHeaders {
		h.Del(k)
	}
	h.Del("Cookie")
	h.Del("Accept-Encoding")
	h.Del("Forwarded")
	h.Del("Expect")
	if upgrade {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", "websocket")
		h.Del("Sec-Websocket-Extensions") // every frame stays plain to the meter
	} else {
		for k := range h {
			if strings.HasPrefix(k, "Sec-Websocket-") {
				delete(h, k)
			}
		}
	}
	for _, kv := range up.Headers {
		h.Set(kv[0], kv[1])
	}
	h.Set(up.Kind.keyHeader(), up.Kind.keyValue(up.key))
	out := (&http.Request{
		Method:        r.Method,
		URL:           &u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Host:          u.Host,
		ContentLength: r.ContentLength,
	}).WithContext(ctx)
	return out
}

// stripKeyParam drops a "key" query parameter (the Gemini API's other
// way to carry a key): the client's is never forwarded.
func stripKeyParam(q string) string {
	if !strings.Contains(q, "key") {
		return q
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return ""
	}
	v.Del("key")
	return v.Encode()
}

// copyHeaders copies src into dst without hop-by-hop headers and without
// the headers src's Connection names.
func copyHeaders(dst, src http.Header) {
	drop := map[string]bool{}
	for _, v := range src.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				drop[http.CanonicalHeaderKey(t)] = true
			}
		}
	}
	for _, k := range hopHeaders {
		drop[k] = true
	}
	for k, vs := range src {
		if drop[k] {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// isWebSocket reports a WebSocket upgrade request.
func isWebSocket(h http.Header) bool {
	if !strings.EqualFold(h.Get("Upgrade"), "websocket") {
		return false
	}
	for _, v := range h.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// joinContext is a's context that also ends with b.
func joinContext(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

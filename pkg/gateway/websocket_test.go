package gateway

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// wsUpstream is a Responses API fake over WebSocket: every message it
// gets (text or binary) is answered with response.created, then
// response.completed reporting 10 input and 5 output tokens, sent as a
// message of the same kind. It records the handshake's headers and the
// messages it got.
type wsUpstream struct {
	srv        *httptest.Server
	auth, cred atomic.Value
	extensions atomic.Value
	got        atomic.Int64
	upgrades   atomic.Int64
}

func newWSUpstream(t *testing.T) *wsUpstream {
	t.Helper()
	u := &wsUpstream{}
	u.srv = httptest.NewUnstartedServer(websocket.Server{
		Handshake: func(c *websocket.Config, r *http.Request) error {
			u.upgrades.Add(1)
			u.auth.Store(r.Header.Get("Authorization"))
			u.cred.Store(r.Header.Get("X-Api-Key"))
			u.extensions.Store(r.Header.Get("Sec-Websocket-Extensions"))
			return nil
		},
		Handler: func(ws *websocket.Conn) {
			for {
				var frame []byte
				if websocket.Message.Receive(ws, &frame) != nil {
					return
				}
				u.got.Add(1)
				// Answered in the kind it came in (x/net/websocket's
				// Message sends a string as text, a []byte as binary).
				binary := ws.PayloadType == websocket.BinaryFrame
				for _, m := range []string{`{"type":"response.created"}`,
					`{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":5}}}`} {
					if binary {
						websocket.Message.Send(ws, []byte(m))
					} else {
						websocket.Message.Send(ws, m)
					}
				}
			}
		},
	})
	u.srv.TLS = upstreamTLS.Clone()
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func wsConfig(t *testing.T, g *Gateway, cred string) *websocket.Config {
	t.Helper()
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(ProviderURL(g.URL(), "openai"), "http")+"/responses", "http://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header.Set("Authorization", "Bearer "+cred)
	return cfg
}

// TestWebSocket: an upgrade reaches the provider with the key instead of
// the credential and without the client's extension offer; messages pass
// both ways, and every data message counts, text or binary: each the
// client sends is a request, each turn's usage is metered.
func TestWebSocket(t *testing.T) {
	up := newWSUpstream(t)
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.srv.URL+"/v1"))
	gr := g.Issue(Budget{})
	defer gr.Revoke()

	cfg := wsConfig(t, g, gr.Credential())
	cfg.Header.Set("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if up.auth.Load() != "Bearer "+testKey || up.cred.Load() != "" {
		t.Fatalf("the upstream handshake carried %q", up.auth.Load())
	}
	if ext := up.extensions.Load(); ext != "" {
		t.Fatalf("the client's extension offer was forwarded: %q", ext)
	}
	for turn, msg := range []any{`{"type":"response.create"}`, []byte(`{"type":"response.create"}`)} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			var got []byte
			if err := websocket.Message.Receive(ws, &got); err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
		}
	}
	if u := gr.Usage(); u != (Usage{Requests: 3, InputTokens: 20, OutputTokens: 10}) {
		t.Errorf("usage %+v, want the handshake and two turns, text and binary", u)
	}
	gr.Revoke()
	if _, err := websocket.DialConfig(cfg); err == nil {
		t.Error("a revoked credential upgraded")
	}
}

// TestWebSocketRefusedWithABudget: a grant with a budget (of either
// kind) is refused any upgrade, before the provider hears of it.
func TestWebSocketRefusedWithABudget(t *testing.T) {
	up := newWSUpstream(t)
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.srv.URL+"/v1"))
	for _, b := range []Budget{{MaxRequests: 100}, {MaxTokens: 100000}} {
		gr := g.Issue(b)
		if ws, err := websocket.DialConfig(wsConfig(t, g, gr.Credential())); err == nil {
			ws.Close()
			t.Errorf("budget %+v: upgraded", b)
		}
		if u := gr.Usage(); u.Requests != 0 {
			t.Errorf("budget %+v: usage %+v", b, u)
		}
		gr.Revoke()
	}
	if n := up.upgrades.Load(); n != 0 {
		t.Errorf("the provider got %d upgrades", n)
	}
}

// rawUpgrade performs a WebSocket handshake with the gateway by hand.
func rawUpgrade(t *testing.T, g *Gateway, cred string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(g.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /openai/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer %s\r\n\r\n", cred)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, resp.Body)
	}
	return c, br, resp.StatusCode
}

// TestWebSocketNegotiatedExtensionIsRefused: an upstream that selects an
// extension although none was offered is refused (its frames would be
// compressed past the meter); the client gets no 101.
func TestWebSocketNegotiatedExtensionIsRefused(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		sum := sha1.Sum([]byte(r.Header.Get("Sec-Websocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
		brw.Flush()
		time.Sleep(time.Second)
	}))
	srv.TLS = upstreamTLS.Clone()
	srv.StartTLS()
	defer srv.Close()
	g := newGateway(t, provider("openai", KindOpenAIResponses, srv.URL))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	if _, _, st := rawUpgrade(t, g, gr.Credential()); st != http.StatusBadGateway {
		t.Fatalf("an upstream's extension: status %d, want 502", st)
	}
}

// TestWebSocketReservedBitEndsTheConnection: a frame with RSV1 set (a
// compressed frame: no extension was negotiated) ends the connection
// unforwarded.
func TestWebSocketReservedBitEndsTheConnection(t *testing.T) {
	up := newWSUpstream(t)
	g := newGateway(t, provider("openai", KindOpenAIResponses, up.srv.URL+"/v1"))
	gr := g.Issue(Budget{})
	defer gr.Revoke()
	c, br, st := rawUpgrade(t, g, gr.Credential())
	if st != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", st)
	}
	// FIN|RSV1|text, masked, 4 bytes (mask 0: the payload as is).
	c.Write([]byte{0xC1, 0x84, 0, 0, 0, 0, 'a', 'b', 'c', 'd'})
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
	if n := up.got.Load(); n != 0 {
		t.Errorf("the provider got %d messages", n)
	}
}

func TestCopyHeadersDropsHopByHop(t *testing.T) {
	src := http.Header{"Connection": {"X-A, close"}, "X-A": {"1"}, "Keep-Alive": {"t"}, "Transfer-Encoding": {"chunked"}, "X-B": {"2"}}
	dst := http.Header{}
	copyHeaders(dst, src)
	if len(dst) != 1 || dst.Get("X-B") != "2" {
		t.Errorf("copied %v", dst)
	}
}

package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
)

// TestWebSocket: an upgrade reaches the provider with the key instead of
// the credential, messages pass both ways, each turn's usage is counted,
// and a message past the budget ends the connection unforwarded.
func TestWebSocket(t *testing.T) {
	var gotKey, gotCred string
	srv := httptest.NewUnstartedServer(websocket.Server{
		Handshake: func(c *websocket.Config, r *http.Request) error {
			gotKey = r.Header.Get("Authorization")
			gotCred = r.Header.Get("X-Api-Key")
			return nil
		},
		Handler: func(ws *websocket.Conn) {
			for {
				var msg string
				if websocket.Message.Receive(ws, &msg) != nil {
					return
				}
				websocket.Message.Send(ws, `{"type":"response.created"}`)
				websocket.Message.Send(ws, `{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":5}}}`)
			}
		},
	})
	srv.TLS = upstreamTLS.Clone()
	srv.StartTLS()
	defer srv.Close()
	g := newGateway(t, provider("openai", KindOpenAIResponses, srv.URL+"/v1"))
	gr := g.Issue(Budget{MaxRequests: 3}) // the handshake and two turns
	defer gr.Revoke()

	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(ProviderURL(g.URL(), "openai"), "http")+"/responses", "http://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header.Set("Authorization", "Bearer "+gr.Credential())
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if gotKey != "Bearer "+testKey || gotCred != "" {
		t.Fatalf("the upstream handshake carried %q", gotKey)
	}
	for turn := 0; turn < 2; turn++ {
		if err := websocket.Message.Send(ws, `{"type":"response.create"}`); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			var msg string
			if err := websocket.Message.Receive(ws, &msg); err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
		}
	}
	if u := gr.Usage(); u != (Usage{Requests: 3, InputTokens: 20, OutputTokens: 10}) {
		t.Errorf("usage %+v", u)
	}
	websocket.Message.Send(ws, `{"type":"response.create"}`)
	var msg string
	if err := websocket.Message.Receive(ws, &msg); err == nil {
		t.Errorf("a message past the budget was answered: %s", msg)
	}
	if !gr.BudgetExceeded() {
		t.Error("the budget refusal was not recorded")
	}

	// A stale credential cannot upgrade.
	gr.Revoke()
	if _, err := websocket.DialConfig(cfg); err == nil {
		t.Error("a revoked credential upgraded")
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

package acceptance

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestUnreadBodyDoesNotPinConnections (F5): a request that announces a
// body and never sends it still gets its error answer, and the Gate closes
// the connection instead of waiting for the body, on every route that
// refuses without reading it.
func TestUnreadBodyDoesNotPinConnections(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	for _, req := range []string{
		"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
		"GET /v1/worker/connect HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
		"GET /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
	} {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(90 * time.Second)) // liveness bound only
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("%q: the Gate kept the connection open: %v (read %q)", req[:20], err, b)
		}
		if !strings.HasPrefix(string(b), "HTTP/1.1 4") || !strings.Contains(string(b), `{"error":{"code":`) {
			t.Fatalf("%q: answer %q", req[:20], b)
		}
	}
}

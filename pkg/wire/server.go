package wire

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"golang.org/x/net/websocket"
)

// ErrHandshake reports a request that was not a valid WebSocket handshake;
// an HTTP error has already been written.
var ErrHandshake = errors.New("wire: not a valid WebSocket handshake")

// Accept completes the WebSocket handshake of an already authenticated
// upgrade request and returns the connection; the caller owns it and must
// Close it. The HTTP handler may return (and its goroutine end) while the
// connection lives on, so a served lane costs one goroutine, not two. It
// accepts clients without an Origin header (Workers are not browsers),
// which websocket.Handler would refuse.
func Accept(w http.ResponseWriter, r *http.Request) (*Conn, error) {

	if _, ok := w.(http.Hijacker); !ok {
		return nil, errors.New("wire: connection cannot be hijacked")
	}
	hw := &holdWriter{ResponseWriter: w}
	var ws *websocket.Conn
	s := websocket.Server{
		Handshake: func(*websocket.Config, *http.Request) error { return nil },
		Handler:   func(c *websocket.Conn) { ws = c },
	}
	// websocket.Server closes the hijacked connection when its handler
	// returns; the held connection ignores that close until released.
	s.ServeHTTP(hw, r)
	if hw.conn == nil {
		return nil, ErrHandshake
	}
	hw.conn.release()
	if ws == nil {
		hw.conn.Close()
		return nil, ErrHandshake
	}
	return NewConn(ws), nil
}

// holdWriter hands websocket.Server a connection whose Close is deferred.
type holdWriter struct {
	http.ResponseWriter
	conn *heldConn
}

func (h *holdWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, buf, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &heldConn{Conn: c}
	h.conn.held.Store(true)
	return h.conn, buf, nil
}

type heldConn struct {
	net.Conn
	held atomic.Bool
}

func (c *heldConn) release() { c.held.Store(false) }

func (c *heldConn) Close() error {
	if c.held.Load() {
		return nil
	}
	return c.Conn.Close()
}

// IsUpgrade reports whether r asks for a WebSocket (RFC 6455, version 13)
// upgrade, so a server can answer anything else with its own documented
// error instead of the WebSocket library's plain-text one.
func IsUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet &&
		headerHasToken(r.Header, "Connection", "upgrade") &&
		headerHasToken(r.Header, "Upgrade", "websocket") &&
		r.Header.Get("Sec-WebSocket-Version") == "13" &&
		r.Header.Get("Sec-WebSocket-Key") != ""
}

// headerHasToken reports whether a comma-separated header carries token,
// compared case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

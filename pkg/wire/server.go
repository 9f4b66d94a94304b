package wire

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
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
	c := NewConn(ws)
	c.cork = hw.conn
	return c, nil
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
	// WebSocket frames are written through held (which can batch them,
	// see Conn.SendEncodedBatch), not straight to the connection. The
	// writer net/http hands over is new and empty; the reader keeps what
	// the client may already have sent.
	return h.conn, bufio.NewReadWriter(buf.Reader, bufio.NewWriter(h.conn)), nil
}

// heldConn is the server side of a lane's connection. Writes made while
// it is corked (by the owning Conn's sendMu holder) are collected and go
// out in one write at uncork; that includes frames the WebSocket library
// writes on its own meanwhile (a pong, a close), each whole, in order.
type heldConn struct {
	net.Conn
	held    atomic.Bool
	mu      sync.Mutex
	corked  bool
	pending []byte
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.corked {
		c.pending = append(c.pending, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *heldConn) startCork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was collected since corking, in one write (none when
// send is false: the batch failed and the connection is being given up).
// Other writers wait meanwhile (the write has the batch's deadline).
func (c *heldConn) uncork(send bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	var err error
	if send && len(c.pending) > 0 {
		_, err = c.Conn.Write(c.pending)
	}
	if cap(c.pending) > 64<<10 {
		c.pending = nil // keep no large buffer after a large message
	} else {
		c.pending = c.pending[:0]
	}
	return err
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

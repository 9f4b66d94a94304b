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
	// The handshake answer is corked: it goes out in one write.
	hr := handshakeRequest(r)
	s.ServeHTTP(hw, hr)
	hr.Header = nil // read by the handshake only
	if hw.conn == nil {
		return nil, ErrHandshake
	}
	hw.conn.release()
	if err := hw.conn.uncork(true); err != nil || ws == nil {
		hw.conn.Close()
		return nil, ErrHandshake
	}
	c := NewConn(ws)
	c.cork = hw.conn
	return c, nil
}

// handshakeRequest is the part of an upgrade request the WebSocket
// handshake reads. The connection keeps its request for as long as it
// lives, so it gets this copy rather than r with every header and the
// server's contexts (and Accept drops even these headers once the
// handshake is done).
func handshakeRequest(r *http.Request) *http.Request {
	h := http.Header{}
	for _, k := range []string{"Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol", "Origin"} {
		if v := r.Header.Values(k); v != nil {
			h[k] = v
		}
	}
	u := *r.URL
	return &http.Request{Method: r.Method, URL: &u, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		Header: h, Host: r.Host, RemoteAddr: r.RemoteAddr, TLS: r.TLS, RequestURI: r.RequestURI}
}

// Per-connection buffer sizes on the server side. A lane spends most of
// its life idle, parked in a read, so these are what an idle lane keeps.
// Frames the server sends are corked (heldConn), so the write buffer only
// needs to hold what the WebSocket library writes uncorked on its own: a
// control frame (at most 2+125 bytes). Reads larger than the read buffer
// go straight into the caller's buffer; worker requests (heartbeat, idle,
// ack-sized results) fit in one read.
const (
	serverReadBuffer  = 512
	serverWriteBuffer = 128
	// corkKeep is the largest write buffer returned to the pool after a
	// send; a larger one (a large message) is dropped.
	corkKeep = 64 << 10
)

// corkPool holds the write buffers of corked sends, so that an idle lane
// keeps none.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

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
	// Whatever the client sent after its request is already in net/http's
	// reader; it is carried over in front of the connection, and the
	// large reader itself is let go.
	var early []byte
	if n := buf.Reader.Buffered(); n > 0 {
		p, _ := buf.Reader.Peek(n)
		early = append([]byte(nil), p...)
	}
	h.conn = &heldConn{Conn: c, early: early}
	h.conn.held.Store(true)
	h.conn.startCork()
	// WebSocket frames are written through held (which corks each send,
	// see Conn.SendEncodedBatch), not straight to the connection.
	return h.conn, bufio.NewReadWriter(bufio.NewReaderSize(h.conn, serverReadBuffer), bufio.NewWriterSize(h.conn, serverWriteBuffer)), nil
}

// heldConn is the server side of a lane's connection. Writes made while
// it is corked (by the owning Conn's sendMu holder) are collected and go
// out in one write at uncork; that includes frames the WebSocket library
// writes on its own meanwhile (a pong, a close), each whole, in order.
// Reads return the bytes the client sent early (before the hijack) first.
type heldConn struct {
	net.Conn
	held    atomic.Bool
	mu      sync.Mutex
	corked  bool
	pending *[]byte // from corkPool while corked
	early   []byte  // read by one goroutine only (the lane's reader)
}

func (c *heldConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		if len(c.early) == 0 {
			c.early = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.corked {
		*c.pending = append(*c.pending, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *heldConn) startCork() {
	c.mu.Lock()
	c.corked = true
	c.pending = corkPool.Get().(*[]byte)
	c.mu.Unlock()
}

// uncork writes what was collected since corking, in one write (none when
// send is false: the send failed and the connection is being given up),
// and gives the buffer back. Other writers wait meanwhile (the write has
// the send's deadline).
func (c *heldConn) uncork(send bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return nil
	}
	c.corked = false
	var err error
	if b := *c.pending; send && len(b) > 0 {
		_, err = c.Conn.Write(b)
	}
	if cap(*c.pending) <= corkKeep {
		*c.pending = (*c.pending)[:0]
		corkPool.Put(c.pending)
	}
	c.pending = nil
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

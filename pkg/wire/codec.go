package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/websocket"
)

// ErrTooLarge reports a message over MaxMessageBytes.
var ErrTooLarge = errors.New("wire: message too large")

// ErrNotText reports a binary WebSocket frame.
var ErrNotText = errors.New("wire: message is not a text frame")

// Decode strictly decodes and validates one message. Errors name a field,
// never a value.
func Decode(data []byte) (Envelope, error) {
	if len(data) > MaxMessageBytes {
		return Envelope{}, ErrTooLarge
	}
	e, err := decodeEnvelope(data)
	if err != nil {
		return Envelope{}, fmt.Errorf("wire: %w", err)
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, fmt.Errorf("wire: %w", err)
	}
	return e, nil
}

// Encode validates e and returns its JSON encoding.
func Encode(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("wire: encode: %w", err)
	}
	if h := e.Hello; h != nil && (h.Plugins == nil || h.Repositories == nil) {
		// Absent lists are empty lists; null never goes on the wire.
		c := *h
		if c.Plugins == nil {
			c.Plugins = []string{}
		}
		if c.Repositories == nil {
			c.Repositories = []string{}
		}
		e.Hello = &c
	}
	b, err := marshal(e)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxMessageBytes {
		return nil, ErrTooLarge
	}
	return b, nil
}

// marshal encodes without HTML escaping and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("wire: encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// codec carries Envelopes over x/net/websocket text frames.
func codec() websocket.Codec {
	return websocket.Codec{
		Marshal: func(v any) ([]byte, byte, error) {
			e, ok := v.(*Envelope)
			if !ok {
				return nil, 0, errors.New("wire: codec sends *Envelope only")
			}
			b, err := Encode(*e)
			return b, websocket.TextFrame, err
		},
		Unmarshal: func(data []byte, payloadType byte, v any) error {
			e, ok := v.(*Envelope)
			if !ok {
				return errors.New("wire: codec receives *Envelope only")
			}
			if payloadType != websocket.TextFrame {
				return ErrNotText
			}
			d, err := Decode(data)
			if err != nil {
				return err
			}
			*e = d
			return nil
		},
	}
}

// Conn is one lane's WebSocket with the bounded codec. Send is safe for
// concurrent use; Receive must be called from one goroutine.
type Conn struct {
	ws    *websocket.Conn
	codec websocket.Codec
	// sendMu serialises sends, so that a batch's frames stay together.
	sendMu sync.Mutex
	// cork batches frames into one write (server side, see Accept); nil on
	// a client.
	cork *heldConn
}

// NewConn wraps ws and bounds every received frame to MaxMessageBytes
// (x/net/websocket's Conn.Read alone is unbounded).
func NewConn(ws *websocket.Conn) *Conn {
	ws.MaxPayloadBytes = MaxMessageBytes
	return &Conn{ws: ws, codec: codec()}
}

// Send validates and writes one message.
func (c *Conn) Send(e Envelope) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.corked(func() error { return c.codec.Send(c.ws, &e) })
}

// SendDeadline is Send with a write deadline; the deadline is cleared after.
func (c *Conn) SendDeadline(e Envelope, d time.Time) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.ws.SetWriteDeadline(d); err != nil {
		return err
	}
	err := c.corked(func() error { return c.codec.Send(c.ws, &e) })
	_ = c.ws.SetWriteDeadline(time.Time{})
	return err
}

// Receive reads, strictly decodes and validates one message. Any error is
// fatal for the connection: close it.
func (c *Conn) Receive() (Envelope, error) {
	var e Envelope
	if err := c.codec.Receive(c.ws, &e); err != nil {
		if errors.Is(err, websocket.ErrFrameTooLarge) {
			return Envelope{}, ErrTooLarge
		}
		return Envelope{}, err
	}
	return e, nil
}

// SetReadDeadline bounds the next Receive.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// Request is the HTTP upgrade request on a server-side Conn (nil on a
// client): its method, URL, Host and TLS state only, no headers.
func (c *Conn) Request() *http.Request { return c.ws.Request() }

// Close closes the connection.
func (c *Conn) Close() error { return c.ws.Close() }

// Dial opens one lane's connection to the Gate at gateURL (ws:// or wss://,
// without a path) with the worker token in the Authorization header. A bad
// token fails the handshake (HTTP 401). The token never appears in errors.
func Dial(ctx context.Context, gateURL, token string) (*Conn, error) {
	u, err := url.Parse(gateURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return nil, errors.New("wire: dial: gate URL must be ws:// or wss:// host[:port] without path")
	}
	origin := "http://" + u.Host
	if u.Scheme == "wss" {
		origin = "https://" + u.Host
	}
	cfg, err := websocket.NewConfig(u.Scheme+"://"+u.Host+Path, origin)
	if err != nil {
		return nil, errors.New("wire: dial: bad gate URL")
	}
	cfg.Header.Set("Authorization", "Bearer "+token)
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		var de *websocket.DialError
		if errors.As(err, &de) {
			err = de.Err
		}
		return nil, fmt.Errorf("wire: dial: %w", err)
	}
	return NewConn(ws), nil
}

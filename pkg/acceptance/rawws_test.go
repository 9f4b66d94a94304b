package acceptance

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// rawWS is a hand-rolled WebSocket client (RFC 6455) over net.Conn, so that
// tests can send anything, including frames no well-behaved client sends.
type rawWS struct {
	c  net.Conn
	br *bufio.Reader
}

const (
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
)

// dialRaw performs the handshake with the given Authorization header
// values. It returns the HTTP response; ws is nil unless the status is 101.
func dialRaw(t testing.TB, addr string, auth ...string) (*rawWS, *http.Response) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	rand.Read(key)
	req := "GET /v1/worker/connect HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key) + "\r\nSec-WebSocket-Version: 13\r\n"
	for _, a := range auth {
		req += "Authorization: " + a + "\r\n"
	}
	req += "\r\n"
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		t.Fatalf("handshake: %v", err)
	}
	c.SetDeadline(time.Time{})
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, resp
	}
	w := &rawWS{c: c, br: br}
	t.Cleanup(func() { c.Close() })
	return w, resp
}

// writeFrame writes one masked frame (fin set).
func (w *rawWS) writeFrame(op byte, payload []byte) error {
	hdr := []byte{0x80 | op}
	n := len(payload)
	switch {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	hdr = append(hdr, mask...)
	buf := make([]byte, 0, len(hdr)+n)
	buf = append(buf, hdr...)
	for i, b := range payload {
		buf = append(buf, b^mask[i%4])
	}
	w.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := w.c.Write(buf)
	return err
}

func (w *rawWS) sendText(t testing.TB, s string) {
	t.Helper()
	if err := w.writeFrame(opText, []byte(s)); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (w *rawWS) sendJSON(t testing.TB, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	w.sendText(t, string(b))
}

var errClosed = errors.New("connection closed by peer")

// readMessage returns the next text message, answering pings; errClosed on
// a close frame or EOF.
func (w *rawWS) readMessage(timeout time.Duration) (string, error) {
	w.c.SetReadDeadline(time.Now().Add(timeout))
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.br, h[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
				return "", errClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return "", err
			}
			return "", errClosed // reset by peer and similar
		}
		op := h[0] & 0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return "", errClosed
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return "", errClosed
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > 8<<20 {
			return "", fmt.Errorf("server frame of %d bytes", n)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(w.br, p); err != nil {
			return "", errClosed
		}
		switch op {
		case opClose:
			return "", errClosed
		case opPing:
			_ = w.writeFrame(opPong, p)
		case opText:
			return string(p), nil
		default:
			return "", fmt.Errorf("unexpected opcode %d", op)
		}
	}
}

// expectClosed asserts the server closes the connection without sending
// any text message.
func (w *rawWS) expectClosed(t testing.TB) {
	t.Helper()
	m, err := w.readMessage(30 * time.Second)
	if err == nil {
		t.Fatalf("expected the connection to close, got message %s", m)
	}
	if !errors.Is(err, errClosed) {
		t.Fatalf("expected the connection to close, got %v", err)
	}
}

// envelope is a loosely decoded wire message.
type envelope struct {
	Type    string `json:"type"`
	Seq     uint64 `json:"seq"`
	Welcome *struct {
		Lane       string `json:"lane"`
		Generation string `json:"generation"`
	} `json:"welcome"`
	Lease *struct {
		JobID      string          `json:"job_id"`
		AttemptID  string          `json:"attempt_id"`
		Ordinal    int             `json:"ordinal"`
		Kind       string          `json:"kind"`
		Task       json.RawMessage `json:"task"`
		DeadlineAt time.Time       `json:"deadline_at"`
	} `json:"lease"`
	Reject *struct {
		Code string `json:"code"`
	} `json:"reject"`
	Ack    *json.RawMessage `json:"ack"`
	Cancel *struct {
		JobID     string `json:"job_id"`
		AttemptID string `json:"attempt_id"`
		Reason    string `json:"reason"`
	} `json:"cancel"`
}

func (w *rawWS) recv(t testing.TB) envelope {
	t.Helper()
	m, err := w.readMessage(60 * time.Second)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	var e envelope
	if err := json.Unmarshal([]byte(m), &e); err != nil {
		t.Fatalf("server sent non-JSON %q", m)
	}
	return e
}

func helloMsg(workerID string, slot int) map[string]any {
	return map[string]any{"type": "hello", "hello": map[string]any{
		"protocol": "forge-wire/v1", "worker_id": workerID, "slot": slot,
		"plugins": []string{"reference"}, "repositories": []string{},
	}}
}

// lane connects as gate worker index i, slot, and returns the welcomed
// connection.
func (g *gate) lane(t testing.TB, i, slot int) (*rawWS, string) {
	t.Helper()
	w, resp := dialRaw(t, g.addr, "Bearer "+g.workers[i].token)
	if w == nil {
		t.Fatalf("dial: %d", resp.StatusCode)
	}
	w.sendJSON(t, helloMsg(g.workers[i].id, slot))
	e := w.recv(t)
	if e.Type != "welcome" || e.Welcome == nil {
		t.Fatalf("expected welcome, got %+v", e)
	}
	return w, e.Welcome.Generation
}

func resultMsg(seq int, jobID, attemptID, output string) map[string]any {
	return map[string]any{"type": "result", "seq": seq, "result": map[string]any{
		"job_id": jobID, "attempt_id": attemptID, "outcome": "succeeded", "output": output}}
}

func failedMsg(seq int, jobID, attemptID, disp, code string) map[string]any {
	return map[string]any{"type": "result", "seq": seq, "result": map[string]any{
		"job_id": jobID, "attempt_id": attemptID, "outcome": "failed", "disposition": disp, "failure_code": code}}
}

func heartbeatMsg(seq int, jobID, attemptID string) map[string]any {
	return map[string]any{"type": "heartbeat", "seq": seq, "heartbeat": map[string]any{"job_id": jobID, "attempt_id": attemptID}}
}

package wire

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordConn counts the writes that reach the network.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *recordConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// clientFrame is a masked text frame as a client sends it.
func clientFrame(p []byte) []byte {
	f := []byte{0x81}
	switch {
	case len(p) < 126:
		f = append(f, 0x80|byte(len(p)))
	case len(p) < 1<<16:
		f = append(f, 0x80|126, byte(len(p)>>8), byte(len(p)))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(len(p)))
	}
	key := make([]byte, 4)
	_, _ = rand.Read(key)
	f = append(f, key...)
	for i, b := range p {
		f = append(f, b^key[i%4])
	}
	return f
}

// readServerFrame reads one unmasked text frame.
func readServerFrame(t *testing.T, r *bufio.Reader) []byte {
	t.Helper()
	h := make([]byte, 2)
	if _, err := io.ReadFull(r, h); err != nil {
		t.Fatal(err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		b := make([]byte, 2)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		n = uint64(binary.BigEndian.Uint16(b))
	case 127:
		b := make([]byte, 8)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		n = binary.BigEndian.Uint64(b)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAcceptSmallBuffers: a client that sends its first message in the
// same write as its upgrade request has it read (the bytes net/http had
// already buffered are carried over); messages far larger than the
// server's read and write buffers arrive whole both ways; each server send
// is one network write; and no send buffer stays with the connection once
// a send is done.
func TestAcceptSmallBuffers(t *testing.T) {
	hb, err := Encode(Envelope{Type: TypeHeartbeat, Seq: 1, Heartbeat: &Heartbeat{JobID: "job_1", AttemptID: "0123456789abcdef0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	lease := testLease()
	lease.Task = []byte(`{"input":"` + strings.Repeat("x", 20<<10) + `"}`)
	big, err := Encode(Envelope{Type: TypeLease, Lease: &lease})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		msgs    []Envelope
		writes  []int
		pending bool
		err     error
	}
	done := make(chan got, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r)
		if err != nil {
			done <- got{err: err}
			return
		}
		go func() {
			defer c.Close()
			var g got
			rc := c.cork.Conn.(*recordConn)
			for i := 0; i < 2; i++ {
				e, err := c.Receive()
				if err != nil {
					g.err = err
					break
				}
				g.msgs = append(g.msgs, e)
			}
			for _, m := range [][]byte{hb, big} {
				before := rc.count()
				if err := c.SendEncoded(m, time.Now().Add(10*time.Second)); err != nil && g.err == nil {
					g.err = err
				}
				g.writes = append(g.writes, rc.count()-before)
			}
			c.cork.mu.Lock()
			g.pending = c.cork.pending != nil
			c.cork.mu.Unlock()
			done <- g
		}()
	}))
	srv.Listener = &recordListener{Listener: srv.Listener}
	srv.Start()
	defer srv.Close()

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET " + Path + " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	first := append([]byte(req), clientFrame(hb)...)
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if _, err := c.Write(clientFrame(big)); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]byte{hb, big} {
		if p := readServerFrame(t, br); !bytes.Equal(p, want) {
			t.Fatalf("server message %d: %d bytes, want %d", i, len(p), len(want))
		}
	}
	g := <-done
	if g.err != nil {
		t.Fatalf("server: %v", g.err)
	}
	if len(g.msgs) != 2 || g.msgs[0].Heartbeat == nil || g.msgs[0].Heartbeat.JobID != "job_1" || g.msgs[1].Lease == nil || len(g.msgs[1].Lease.Task) != len(lease.Task) {
		t.Fatalf("server received %+v", g.msgs)
	}
	for i, n := range g.writes {
		if n != 1 {
			t.Errorf("send %d took %d network writes, want 1", i, n)
		}
	}
	if g.pending {
		t.Error("the connection kept its send buffer after the send")
	}
}

// recordListener wraps accepted connections in recordConn.
type recordListener struct{ net.Listener }

func (l *recordListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordConn{Conn: c}, nil
}

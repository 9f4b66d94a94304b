package wire

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// countConn records every Write that reaches the network.
type countConn struct {
	net.Conn
	writes [][]byte
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func TestHeldConnCorkCollectsWritesIntoOne(t *testing.T) {
	cc := &countConn{}
	h := &heldConn{Conn: cc}
	if _, err := h.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	h.startCork()
	for _, p := range []string{"frame1", "pong", "frame2"} {
		if n, err := h.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("corked write: %d %v", n, err)
		}
	}
	if len(cc.writes) != 1 {
		t.Fatalf("corked writes reached the network: %q", cc.writes)
	}
	if err := h.uncork(true); err != nil {
		t.Fatal(err)
	}
	if len(cc.writes) != 2 || string(cc.writes[1]) != "frame1pongframe2" {
		t.Fatalf("writes %q, want the corked ones as one, in order", cc.writes)
	}
	// A failed batch drops what it collected.
	h.startCork()
	h.Write([]byte("lost"))
	if err := h.uncork(false); err != nil || len(cc.writes) != 2 {
		t.Fatalf("dropped batch: %v %q", err, cc.writes)
	}
	if _, err := h.Write([]byte("b")); err != nil || string(cc.writes[2]) != "b" {
		t.Fatalf("write after uncork: %v %q", err, cc.writes)
	}
}

// TestSendEncodedBatchOverWebSocket: a batch (an ack and a lease) sent by
// the server arrives as separate, whole messages in order, and the
// connection keeps working after it.
func TestSendEncodedBatchOverWebSocket(t *testing.T) {
	lease := testLease()
	leaseBytes, err := Encode(Envelope{Type: TypeLease, Lease: &lease})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := Encode(Envelope{Type: TypeAck, Seq: 1, Ack: &Ack{}})
	if err != nil {
		t.Fatal(err)
	}
	ack2, err := Encode(Envelope{Type: TypeAck, Seq: 2, Ack: &Ack{}})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r)
		if err != nil {
			errs <- err
			return
		}
		go func() {
			defer c.Close()
			if c.cork == nil {
				errs <- context.Canceled // server connections must batch
				return
			}
			d := time.Now().Add(10 * time.Second)
			if err := c.SendEncodedBatch(d, ack, leaseBytes); err != nil {
				errs <- err
				return
			}
			errs <- c.SendEncoded(ack2, d)
		}()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-errs; err != nil {
		t.Fatalf("server: %v", err)
	}
	for i, want := range [][]byte{ack, leaseBytes, ack2} {
		e, err := c.Receive()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d: got %s, want %s", i, got, want)
		}
	}
}

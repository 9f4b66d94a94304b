package wire

import (
	"time"

	"golang.org/x/net/websocket"
)

// rawMarshal passes bytes that are already an encoded Envelope.
func rawMarshal(v any) ([]byte, byte, error) { return v.([]byte), websocket.TextFrame, nil }

// SendEncoded writes one message encoded by Encode, EncodeAck,
// EncodeLease, EncodeResult or EncodeActivity, with a write deadline
// (cleared after).
func (c *Conn) SendEncoded(b []byte, d time.Time) error {
	return c.SendEncodedBatch(d, b)
}

// SendEncodedBatch writes messages encoded as for SendEncoded, in order, with a
// write deadline (cleared after). On a server connection (Accept) the
// frames of a send go out in one write: an ack and the lease that follows
// it cost the peer one read, not two.
func (c *Conn) SendEncodedBatch(d time.Time, msgs ...[]byte) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.ws.SetWriteDeadline(d); err != nil {
		return err
	}
	defer c.ws.SetWriteDeadline(time.Time{})
	raw := websocket.Codec{Marshal: rawMarshal}
	return c.corked(func() error {
		for _, b := range msgs {
			if err := raw.Send(c.ws, b); err != nil {
				return err
			}
		}
		return nil
	})
}

// corked runs send (which holds sendMu) with a server connection corked,
// so that its frames leave in one write; on a client it just runs send.
func (c *Conn) corked(send func() error) error {
	if c.cork == nil {
		return send()
	}
	c.cork.startCork()
	if err := send(); err != nil {
		c.cork.uncork(false)
		return err
	}
	return c.cork.uncork(true)
}

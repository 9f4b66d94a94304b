package wire

import (
	"time"

	"golang.org/x/net/websocket"
)

// rawMarshal passes bytes that are already an encoded Envelope.
func rawMarshal(v any) ([]byte, byte, error) { return v.([]byte), websocket.TextFrame, nil }

// SendEncoded writes one message encoded by Encode, with a write deadline
// (cleared after).
func (c *Conn) SendEncoded(b []byte, d time.Time) error {
	return c.SendEncodedBatch(d, b)
}

// SendEncodedBatch writes messages encoded by Encode, in order, with a
// write deadline (cleared after). On a
// server connection (Accept) the frames of a batch go out in one write:
// an ack and the lease that follows it cost the peer one read, not two.
func (c *Conn) SendEncodedBatch(d time.Time, msgs ...[]byte) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.ws.SetWriteDeadline(d); err != nil {
		return err
	}
	defer c.ws.SetWriteDeadline(time.Time{})
	raw := websocket.Codec{Marshal: rawMarshal}
	if c.cork == nil || len(msgs) < 2 {
		for _, b := range msgs {
			if err := raw.Send(c.ws, b); err != nil {
				return err
			}
		}
		return nil
	}
	c.cork.startCork()
	for _, b := range msgs {
		if err := raw.Send(c.ws, b); err != nil {
			c.cork.uncork(false)
			return err
		}
	}
	return c.cork.uncork(true)
}

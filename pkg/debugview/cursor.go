package debugview

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
)

// maxCursorLen bounds a cursor string before any decoding.
const maxCursorLen = 512

var errBadCursor = errors.New("invalid cursor")

// cursorCodec signs and verifies positions. The route tag (and, for a
// timeline, the job id) is part of the MAC, so a cursor only works on the
// listing that issued it.
type cursorCodec struct {
	key [32]byte
}

func (c *cursorCodec) mac(tag string, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte("debugview-cursor-v1\x00"))
	m.Write([]byte(tag))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

func (c *cursorCodec) seal(tag string, payload []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(c.mac(tag, payload))
}

func (c *cursorCodec) open(tag, cursor string) ([]byte, error) {
	if len(cursor) > maxCursorLen {
		return nil, errBadCursor
	}
	p, s, ok := strings.Cut(cursor, ".")
	if !ok {
		return nil, errBadCursor
	}
	enc := base64.RawURLEncoding.Strict()
	payload, err1 := enc.DecodeString(p)
	sum, err2 := enc.DecodeString(s)
	if err1 != nil || err2 != nil || len(sum) != sha256.Size || !hmac.Equal(sum, c.mac(tag, payload)) {
		return nil, errBadCursor
	}
	return payload, nil
}

// Positions are encoded as fixed fields: int64 big-endian values, then the
// remaining bytes as the string part.

func (c *cursorCodec) jobsCursor(afterID string) string {
	return c.seal("jobs", []byte(afterID))
}

func (c *cursorCodec) jobsPosition(cursor string) (string, error) {
	b, err := c.open("jobs", cursor)
	if err != nil || len(b) == 0 {
		return "", errBadCursor
	}
	return string(b), nil
}

func (c *cursorCodec) lanesCursor(lane string) string {
	return c.seal("lanes", []byte(lane))
}

func (c *cursorCodec) lanesPosition(cursor string) (string, error) {
	b, err := c.open("lanes", cursor)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (c *cursorCodec) eventsCursor(jobID string, seq int64) string {
	return c.seal("events\x00"+jobID, binary.BigEndian.AppendUint64(nil, uint64(seq)))
}

func (c *cursorCodec) eventsPosition(jobID, cursor string) (int64, error) {
	b, err := c.open("events\x00"+jobID, cursor)
	if err != nil || len(b) != 8 {
		return 0, errBadCursor
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

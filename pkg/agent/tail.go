package agent

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// DefaultTailBytes bounds the raw tail kept of one run's event stream.
const DefaultTailBytes = 8 << 10

// redacted replaces every secret value in the tail.
const redacted = "[redacted]"

// Tail keeps the last bytes of an agent's raw event stream, for local
// diagnosis of a failed run (raw before parse: every line is recorded
// before it is interpreted, so a parser bug is visible in what was kept).
// Secret values (the provider key) are replaced before a line is stored,
// so the tail never holds one; a line longer than the whole tail keeps
// only its end. The zero value is unusable; use NewTail.
type Tail struct {
	limit   int
	secrets [][]byte
	buf     []byte
}

// NewTail returns a tail of at most limit bytes (DefaultTailBytes when
// limit <= 0) that redacts every non-empty value in secrets.
func NewTail(limit int, secrets ...string) *Tail {
	if limit <= 0 {
		limit = DefaultTailBytes
	}
	t := &Tail{limit: limit}
	for _, s := range secrets {
		if s != "" {
			t.secrets = append(t.secrets, []byte(s))
		}
	}
	return t
}

// Record appends one raw line (without its LF) and a newline.
func (t *Tail) Record(line []byte) {
	for _, s := range t.secrets {
		if bytes.Contains(line, s) {
			line = bytes.ReplaceAll(line, s, []byte(redacted))
		}
	}
	t.buf = append(t.buf, line...)
	t.buf = append(t.buf, '\n')
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

// Bytes returns a copy of what is kept.
func (t *Tail) Bytes() []byte { return bytes.Clone(t.buf) }

// Quoted returns the tail as one Go-quoted line (control characters and
// invalid UTF-8 escaped), for a single diagnostic line. Secrets were
// replaced before the tail was cut at its front, so a cut can split only
// text that was never secret.
func Quoted(tail []byte) string {
	for len(tail) > 0 && !utf8.Valid(tail[:min(len(tail), 4)]) {
		tail = tail[1:] // drop a rune split by the cut
	}
	return strconv.Quote(string(tail))
}

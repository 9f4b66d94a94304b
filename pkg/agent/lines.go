package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf8"
)

// DefaultMaxLineBytes bounds one event line (without its LF).
const DefaultMaxLineBytes = 4 << 20

// readLines reads r line by line, each line bounded by max, records every
// complete line in tail before handing it to observe (raw before parse),
// and stops at EOF, at a read error, or when observe returns false. An
// overlong line, or a final line without LF, is recorded (its end) and
// reported as malformed; the rest of r is then drained and discarded.
func readLines(r io.Reader, max int, tail *Tail, observe func(line []byte) bool) (malformed bool) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			tail.Record(chunk)
			io.Copy(io.Discard, br)
			return true
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(line) > 0 { // EOF without LF: not a complete event
				tail.Record(line)
				return true
			}
			return false
		}
		raw := line[:len(line)-1]
		tail.Record(raw)
		if !observe(raw) {
			io.Copy(io.Discard, br)
			return false
		}
		line = line[:0]
	}
}

// EventObject reports whether line is one event as an adapter may read it:
// valid UTF-8 holding one JSON object with unique top-level keys
// (encoding/json would silently keep the last of two).
func EventObject(line []byte) bool {
	if !utf8.Valid(line) || !json.Valid(line) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok || seen[key] {
			return false
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return true
}

package store

import (
	"bytes"
	"encoding/json"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

// validRef: job ids, attempt ids and generations: 1..64 of [A-Za-z0-9_-].
func validRef(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validLane: a worker id, optionally followed by '#' and a slot number.
func validLane(s string) bool {
	id, slot, found := cutLast(s, '#')
	if !policy.ValidID(id) {
		return false
	}
	if !found {
		return true
	}
	if slot == "" || len(slot) > 3 || slot[0] == '0' {
		return false
	}
	for i := 0; i < len(slot); i++ {
		if slot[i] < '0' || slot[i] > '9' {
			return false
		}
	}
	return true
}

func cutLast(s string, c byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// validCode: a bounded failure code, [a-z][a-z0-9_]{0,63}.
func validCode(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func validSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// compactObject returns the compacted form of a JSON object, or false if b
// is not a single valid JSON object.
func compactObject(b []byte) ([]byte, bool) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, false
	}
	out := buf.Bytes()
	if len(out) < 2 || out[0] != '{' {
		return nil, false
	}
	return out, true
}

func validFence(f Fence) error {
	if !validRef(f.JobID) || !validRef(f.AttemptID) || !validLane(f.Lane) || !validRef(f.Generation) {
		return invalid("malformed fence")
	}
	return nil
}

func validIDList(ids []string, max int) bool {
	if len(ids) > max {
		return false
	}
	for _, id := range ids {
		if !policy.ValidID(id) {
			return false
		}
	}
	return true
}

package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

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
	if !ident.ValidRef(f.JobID) || !ident.ValidRef(f.AttemptID) || !ident.ValidLane(f.Lane) || !ident.ValidRef(f.Generation) {
		return invalid("malformed fence")
	}
	return nil
}

func validIDList(ids []string, max int) bool {
	if len(ids) > max {
		return false
	}
	for _, id := range ids {
		if !ident.ValidID(id) {
			return false
		}
	}
	return true
}

// MaxTestArgCounts bounds the tests of one coding job the store records.
const MaxTestArgCounts = 1024

// encodeTestArgs renders argv lengths as the test_args column: decimal
// counts joined by ',' ("" for a job without tests).
func encodeTestArgs(counts []int) (string, bool) {
	if len(counts) > MaxTestArgCounts {
		return "", false
	}
	b := make([]byte, 0, 3*len(counts))
	for i, n := range counts {
		if n < 1 || n > MaxTestArgCounts {
			return "", false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b), true
}

// decodeTestArgs reads a test_args column written by encodeTestArgs.
func decodeTestArgs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var counts []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > MaxTestArgCounts {
			return nil, errors.New("store: malformed test_args column")
		}
		counts = append(counts, n)
	}
	return counts, nil
}

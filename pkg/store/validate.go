package store

import (
	"bytes"
	"encoding/json"

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

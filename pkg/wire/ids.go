package wire

import (
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

// ValidID reports whether s is a safe configuration identifier (worker,
// plugin, repository, pool). The rule is the policy package's, so an id the
// Gate accepts in config is exactly an id the wire accepts.
func ValidID(s string) bool { return policy.ValidID(s) }

// ValidRef reports whether s is a safe job or attempt id: 1..MaxRefBytes
// ASCII letters, digits, '_' or '-'.
func ValidRef(s string) bool {
	if len(s) == 0 || len(s) > MaxRefBytes {
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

// LaneName is the server-side name of a Worker's lane: slot 0 is the worker
// id itself, slot k > 0 is "<id>#k".
func LaneName(workerID string, slot int) string {
	if slot == 0 {
		return workerID
	}
	return workerID + "#" + strconv.Itoa(slot)
}

// ValidLane reports whether s is a lane name LaneName could produce for a
// valid worker id and a slot in 0..MaxSlot.
func ValidLane(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '#' {
			continue
		}
		n := s[i+1:]
		if !ValidID(s[:i]) || n == "" || n[0] == '0' || len(n) > 3 {
			return false
		}
		k, err := strconv.Atoi(n)
		return err == nil && k >= 1 && k <= MaxSlot && strconv.Itoa(k) == n
	}
	return ValidID(s)
}

// ValidGeneration reports whether s is GenerationHexLen lowercase hex digits.
func ValidGeneration(s string) bool { return lowerHex(s, GenerationHexLen) }

// ValidSHA reports whether s is a full 40-digit lowercase hex Git object id.
func ValidSHA(s string) bool { return lowerHex(s, 40) }

// ValidBranch reports whether b is a conservative Git branch name (the
// part after refs/heads/): 1..255 bytes of [A-Za-z0-9._/-], no leading
// '-', '/' or '.', no trailing '/', '.' or ".lock", no "..", "//", "/."
// or "@{". It needs no JSON escaping.
func ValidBranch(b string) bool {
	if b == "" || len(b) > 255 || b[0] == '-' || b[0] == '/' || b[0] == '.' ||
		strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".") || strings.HasSuffix(b, ".lock") ||
		strings.Contains(b, "..") || strings.Contains(b, "//") || strings.Contains(b, "/.") || strings.Contains(b, "@{") {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
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

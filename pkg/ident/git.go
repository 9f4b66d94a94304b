package ident

import "strings"

// Bounds of Git names.
const (
	SHAHexLen      = 40  // hex digits of a SHA-1 Git object id
	SHA256HexLen   = 64  // hex digits of a SHA-256 digest or Git object id
	MaxBranchBytes = 255 // a branch name (the part after refs/heads/)
)

// ValidSHA reports whether s is a full SHA-1 Git object id: exactly
// SHAHexLen lowercase hex digits. Everything Agent Forge creates or accepts
// as a base or candidate commit has this form.
func ValidSHA(s string) bool { return lowerHex(s, SHAHexLen) }

// ValidSHA256 reports whether s is a SHA-256 digest: exactly SHA256HexLen
// lowercase hex digits (a file's pinned digest, a SHA-256 Git object id).
func ValidSHA256(s string) bool { return lowerHex(s, SHA256HexLen) }

// ValidObjectID reports whether s is a full Git object id in either hash
// format: SHAHexLen or SHA256HexLen lowercase hex digits. Readers of
// recorded data (the CLI, the debug viewer) accept both.
func ValidObjectID(s string) bool {
	return ValidSHA(s) || ValidSHA256(s)
}

// ValidBranch reports whether b is a conservative Git branch name (the
// part after refs/heads/): 1..MaxBranchBytes of [A-Za-z0-9._/-], no
// leading '-', '/' or '.', no trailing '/', '.' or ".lock", no "..", "//",
// "/." or "@{".
func ValidBranch(b string) bool {
	if b == "" || len(b) > MaxBranchBytes || b[0] == '-' || b[0] == '/' || b[0] == '.' ||
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

package github

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Name limits GitHub applies.
const (
	MaxOwnerBytes = 39
	MaxRepoBytes  = 100
)

// ValidOwner reports whether s is a GitHub account name: 1..39 ASCII
// letters, digits and single inner hyphens.
func ValidOwner(s string) bool {
	if s == "" || len(s) > MaxOwnerBytes || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidRepo reports whether s is a bare repository name (no owner): 1..100
// ASCII letters, digits, '.', '_' or '-', not "." or "..", not ending in
// ".git" (GitHub strips it, so the name would be ambiguous).
func ValidRepo(s string) bool {
	if s == "" || len(s) > MaxRepoBytes || s == "." || s == ".." || strings.HasSuffix(strings.ToLower(s), ".git") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// SafeBranch reports whether b may name a branch this client creates or
// targets: a conservative Git branch name (wire.ValidBranch) that is
// also not "HEAD", does not start with "refs/" and is not 40 hex digits
// (each of which Git or GitHub would read as something else).
func SafeBranch(b string) bool {
	return wire.ValidBranch(b) && b != "HEAD" && !strings.HasPrefix(b, "refs/") && !wire.ValidSHA(strings.ToLower(b))
}

// RemoteURL is the HTTPS URL of owner/repo on GitHub.
func RemoteURL(owner, repo string) string {
	return GitBase + "/" + owner + "/" + repo + ".git"
}

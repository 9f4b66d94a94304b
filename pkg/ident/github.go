package ident

import "strings"

// Bounds of GitHub names and of the Worker's candidate refs.
const (
	MaxGitHubOwnerBytes = 39  // a user or organization login
	MaxGitHubRepoBytes  = 100 // a repository name without its owner
	// CandidateRefPrefix starts every Worker candidate ref:
	// refs/agent-forge/candidates/<job>/<attempt>.
	CandidateRefPrefix = "refs/agent-forge/candidates/"
)

// ValidGitHubOwner reports whether s is a GitHub account name: 1..39
// ASCII letters, digits and single '-' between them (not leading,
// trailing or doubled).
func ValidGitHubOwner(s string) bool {
	if s == "" || len(s) > MaxGitHubOwnerBytes || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(alnum(c) || c == '-') {
			return false
		}
	}
	return true
}

// ValidGitHubLogin reports whether s is the login of a GitHub user or of
// an App's bot account: an account name (ValidGitHubOwner), for a bot
// followed by "[bot]".
func ValidGitHubLogin(s string) bool {
	return ValidGitHubOwner(strings.TrimSuffix(s, "[bot]"))
}

// ValidGitHubRepo reports whether s is a bare GitHub repository name (no
// owner): 1..100 ASCII letters, digits, '.', '_' or '-', not "." or "..",
// and not ending in ".git" (GitHub strips that suffix, so the name would
// be ambiguous) or ".wiki" (a repository's wiki, not a repository), in any
// case.
func ValidGitHubRepo(s string) bool {
	lower := strings.ToLower(s)
	if s == "" || len(s) > MaxGitHubRepoBytes || s == "." || s == ".." ||
		strings.HasSuffix(lower, ".git") || strings.HasSuffix(lower, ".wiki") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(alnum(c) || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// ValidCandidateRef reports whether ref is exactly
// refs/agent-forge/candidates/<job>/<attempt> with job and attempt refs
// (ValidRef).
func ValidCandidateRef(ref string) bool {
	rest, ok := strings.CutPrefix(ref, CandidateRefPrefix)
	if !ok {
		return false
	}
	job, attempt, ok := strings.Cut(rest, "/")
	return ok && ValidRef(job) && ValidRef(attempt)
}

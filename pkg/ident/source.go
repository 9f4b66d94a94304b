package ident

import "strings"

// Bounds of a prepared repository's path and of a public clone URL.
const (
	MaxRepositoryPathBytes = 4096
	publicURLPrefix        = "https://github.com/"
	publicURLSuffix        = ".git"
	// MaxPublicURLBytes is the longest URL ParsePublicURL can accept.
	MaxPublicURLBytes = len(publicURLPrefix) + MaxGitHubOwnerBytes + 1 + MaxGitHubRepoBytes + len(publicURLSuffix)
)

// ParsePublicURL accepts only the exact public HTTPS clone-URL shape
// https://github.com/<owner>/<repository>.git, byte for byte, and returns
// its two names: lowercase scheme and host, no credentials, port, query,
// fragment, percent-escapes, whitespace, trailing slash, empty or dot
// segments or extra segments, and the ".git" suffix in lowercase. The
// names are ones GitHub allows (ValidGitHubOwner, ValidGitHubRepo).
// Nothing is case-folded: names keep the case written.
func ParsePublicURL(s string) (owner, repo string, ok bool) {
	if len(s) > MaxPublicURLBytes {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(s, publicURLPrefix)
	if !ok {
		return "", "", false
	}
	if rest, ok = strings.CutSuffix(rest, publicURLSuffix); !ok {
		return "", "", false
	}
	owner, repo, ok = strings.Cut(rest, "/")
	if !ok || !ValidGitHubOwner(owner) || !ValidGitHubRepo(repo) {
		return "", "", false
	}
	return owner, repo, true
}

// ValidPreparedName reports whether name is a prepared public-source bare
// repository's name: the lowercase hex SHA-256 of its URL and ".git".
func ValidPreparedName(name string) bool {
	h, ok := strings.CutSuffix(name, publicURLSuffix)
	return ok && ValidSHA256(h)
}

// ValidRepositoryPath reports whether p is a canonical absolute path of
// printable ASCII other than '"', '\', '<', '>' and '&' (nothing a JSON
// encoder escapes), at most MaxRepositoryPathBytes: no ".", ".." or empty
// elements, no trailing '/', not "/".
func ValidRepositoryPath(p string) bool {
	if len(p) < 2 || len(p) > MaxRepositoryPathBytes || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < ' ' || c > '~' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	q := p + "/"
	return !strings.Contains(q, "//") && !strings.Contains(q, "/./") && !strings.Contains(q, "/../")
}

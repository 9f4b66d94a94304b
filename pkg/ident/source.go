package ident

import "strings"

// Bounds of a public clone URL's names (GitHub's own limits) and of a
// prepared repository's path.
const (
	MaxOwnerBytes          = 39
	MaxRepoNameBytes       = 100
	MaxRepositoryPathBytes = 4096
	publicURLPrefix        = "https://github.com/"
	publicURLSuffix        = ".git"
	// MaxPublicURLBytes is the longest URL ParsePublicURL can accept.
	MaxPublicURLBytes = len(publicURLPrefix) + MaxOwnerBytes + 1 + MaxRepoNameBytes + len(publicURLSuffix)
)

// ParsePublicURL accepts only the exact public HTTPS clone-URL shape
// https://github.com/<owner>/<repository>.git, byte for byte, and returns
// its two names: lowercase scheme and host, no credentials, port, query,
// fragment, percent-escapes, whitespace, trailing slash, empty or dot
// segments or extra segments, and the ".git" suffix in lowercase. The
// names are ones GitHub allows: the owner is 1..MaxOwnerBytes ASCII
// letters, digits and single '-' between them (not leading, trailing or
// doubled); the repository is 1..MaxRepoNameBytes ASCII letters, digits,
// '.', '_' and '-', not "." or "..", and not itself ending in ".git" (which
// GitHub strips) or ".wiki" (a repository's wiki, not a repository), in
// any case. Nothing is case-folded: names keep the case written.
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
	if !ok || !validOwner(owner) || !validRepoName(repo) {
		return "", "", false
	}
	return owner, repo, true
}

func validOwner(s string) bool {
	if s == "" || len(s) > MaxOwnerBytes || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(alnum(c) || c == '-') {
			return false
		}
	}
	return true
}

func validRepoName(s string) bool {
	lower := strings.ToLower(s)
	if s == "" || len(s) > MaxRepoNameBytes || s == "." || s == ".." ||
		strings.HasSuffix(lower, publicURLSuffix) || strings.HasSuffix(lower, ".wiki") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(alnum(c) || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

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

package source

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
)

// Bounds of a public clone URL's parts (GitHub's own limits).
const (
	MaxOwnerBytes = 39
	MaxRepoBytes  = 100
	urlPrefix     = "https://github.com/"
	urlSuffix     = ".git"
	// MaxURLBytes is the longest URL ParseURL can accept.
	MaxURLBytes = len(urlPrefix) + MaxOwnerBytes + 1 + MaxRepoBytes + len(urlSuffix)
)

// ErrURL is the one error ParseURL returns. It never holds the value.
var ErrURL = errors.New("must be exactly https://github.com/<owner>/<repository>.git")

// URL is an accepted public clone URL, split into its two names.
type URL struct {
	Owner string
	Repo  string
}

// String is the exact URL ParseURL accepted.
func (u URL) String() string { return urlPrefix + u.Owner + "/" + u.Repo + urlSuffix }

// ParseURL accepts only the exact public HTTPS clone-URL shape
// https://github.com/<owner>/<repository>.git, byte for byte: lowercase
// scheme and host, no credentials, port, query, fragment, percent-escapes,
// whitespace, trailing slash, empty or dot segments or extra segments, and
// the ".git" suffix in lowercase. The owner is 1..39 ASCII letters, digits
// and '-', neither starting nor ending with '-'; the repository is 1..100
// ASCII letters, digits, '.', '_' and '-', not "." or "..", and not itself
// ending in ".git". Nothing is case-folded: names keep the case written.
func ParseURL(s string) (URL, error) {
	if len(s) > MaxURLBytes {
		return URL{}, ErrURL
	}
	rest, ok := strings.CutPrefix(s, urlPrefix)
	if !ok {
		return URL{}, ErrURL
	}
	rest, ok = strings.CutSuffix(rest, urlSuffix)
	if !ok {
		return URL{}, ErrURL
	}
	owner, repo, ok := strings.Cut(rest, "/")
	if !ok || !validOwner(owner) || !validRepo(repo) {
		return URL{}, ErrURL
	}
	return URL{Owner: owner, Repo: repo}, nil
}

func validOwner(s string) bool {
	if s == "" || len(s) > MaxOwnerBytes || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(alnum(c) || c == '-') {
			return false
		}
	}
	return true
}

func validRepo(s string) bool {
	if s == "" || len(s) > MaxRepoBytes || s == "." || s == ".." || strings.HasSuffix(s, urlSuffix) {
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

// DirName is the bare repository's name for the exact URL bytes: the
// lowercase hex SHA-256 of the URL followed by ".git".
func DirName(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:]) + ".git"
}

// Dir is the prepared bare repository of url under root.
func Dir(root, url string) string { return filepath.Join(root, DirName(url)) }

// IsDirName reports whether name has the shape DirName produces (64
// lowercase hex digits and ".git").
func IsDirName(name string) bool {
	hexPart, ok := strings.CutSuffix(name, urlSuffix)
	if !ok || len(hexPart) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

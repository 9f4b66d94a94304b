package source

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// ErrURL is the one error ParseURL returns. It never holds the value.
var ErrURL = errors.New("must be exactly https://github.com/<owner>/<repository>.git")

// URL is an accepted public clone URL, split into its two names.
type URL struct {
	Owner string
	Repo  string
}

// String is the exact URL ParseURL accepted.
func (u URL) String() string { return "https://github.com/" + u.Owner + "/" + u.Repo + ".git" }

// ParseURL accepts exactly what ident.ParsePublicURL accepts.
func ParseURL(s string) (URL, error) {
	owner, repo, ok := ident.ParsePublicURL(s)
	if !ok {
		return URL{}, ErrURL
	}
	return URL{Owner: owner, Repo: repo}, nil
}

// DirName is the bare repository's name for the exact URL bytes: the
// lowercase hex SHA-256 of the URL followed by ".git".
func DirName(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:]) + ".git"
}

// Dir is the prepared bare repository of url under root.
func Dir(root, url string) string { return filepath.Join(root, DirName(url)) }

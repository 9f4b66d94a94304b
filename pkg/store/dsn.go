package store

import (
	"errors"
	"path/filepath"
	"strings"
)

// DSNError says why a database DSN was rejected. It never contains the DSN
// or any part of the path.
type DSNError struct{ Reason string }

func (e *DSNError) Error() string { return "store: invalid database DSN: " + e.Reason }

// Is makes errors.Is(err, ErrInvalidDSN) true for every DSNError.
func (e *DSNError) Is(target error) bool { return target == ErrInvalidDSN }

// ErrInvalidDSN matches every DSN rejection.
var ErrInvalidDSN = errors.New("store: invalid database DSN")

// location is a parsed DSN: either an in-memory database (driver holds the
// DSN handed to SQLite unchanged) or a file at an absolute, cleaned path.
type location struct {
	memory bool
	driver string
	path   string
}

// maxPathBytes bounds a resolved database path; maxDSNBytes leaves room for
// a fully percent-escaped path of that length.
const (
	maxPathBytes = 4096
	maxDSNBytes  = 3*maxPathBytes + 64
)

func dsnErr(reason string) error { return &DSNError{Reason: reason} }

// parseDSN accepts exactly the DSN forms the spec lists:
//   - ":memory:";
//   - "file::memory:" with an optional cache=private|shared;
//   - "file:NAME?mode=memory" or "file:?mode=memory" (NAME of [A-Za-z0-9._-],
//     at most 64 bytes) with an optional cache=private|shared;
//   - a plain relative or absolute path (not starting with ':' and without
//     NUL), resolved against the working directory;
//   - "file:PATH", "file:/PATH" or "file:///PATH" with percent-escapes, no
//     fragment, and only mode=rwc and cache=private|shared, each at most once.
//
// The cache parameter of a file DSN is accepted but has no effect: file
// databases always use private caches (the store's writer/reader split
// relies on WAL, not shared-cache locking).
func parseDSN(dsn string) (location, error) {
	if dsn == "" {
		return location{}, dsnErr("empty")
	}
	if len(dsn) > maxDSNBytes {
		return location{}, dsnErr("too long")
	}
	if strings.IndexByte(dsn, 0) >= 0 {
		return location{}, dsnErr("contains NUL")
	}
	if dsn == ":memory:" {
		return location{memory: true, driver: dsn}, nil
	}
	if !strings.HasPrefix(dsn, "file:") {
		if dsn[0] == ':' {
			return location{}, dsnErr("plain path may not start with ':'")
		}
		return filePath(dsn)
	}
	rest := dsn[len("file:"):]
	if strings.IndexByte(rest, '#') >= 0 {
		return location{}, dsnErr("fragment not allowed")
	}
	rawPath, query, hasQuery := strings.Cut(rest, "?")
	params, err := parseParams(query, hasQuery)
	if err != nil {
		return location{}, err
	}
	mode, hasMode := params["mode"]
	if rawPath == ":memory:" {
		if hasMode && mode != "memory" {
			return location{}, dsnErr("unsupported mode for a memory database")
		}
		return location{memory: true, driver: dsn}, nil
	}
	if hasMode && mode == "memory" {
		if !validMemoryName(rawPath) {
			return location{}, dsnErr("unsupported memory database name")
		}
		return location{memory: true, driver: dsn}, nil
	}
	if hasMode && mode != "rwc" {
		return location{}, dsnErr("unsupported mode")
	}
	if strings.HasPrefix(rawPath, "//") {
		if !strings.HasPrefix(rawPath, "///") {
			return location{}, dsnErr("file URI authority not allowed")
		}
		rawPath = rawPath[2:]
	}
	p, err := unescapePath(rawPath)
	if err != nil {
		return location{}, err
	}
	return filePath(p)
}

func parseParams(query string, present bool) (map[string]string, error) {
	params := map[string]string{}
	if !present {
		return params, nil
	}
	if query == "" {
		return nil, dsnErr("empty query")
	}
	for _, item := range strings.Split(query, "&") {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return nil, dsnErr("malformed parameter")
		}
		if _, dup := params[k]; dup {
			return nil, dsnErr("duplicate parameter")
		}
		switch k {
		case "mode":
			if v != "rwc" && v != "memory" {
				return nil, dsnErr("unsupported mode")
			}
		case "cache":
			if v != "private" && v != "shared" {
				return nil, dsnErr("unsupported cache")
			}
		default:
			return nil, dsnErr("unsupported parameter")
		}
		params[k] = v
	}
	return params, nil
}

func validMemoryName(s string) bool {
	if len(s) > 64 {
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

func unescapePath(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", dsnErr("malformed percent-escape")
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if c == 0 {
			return "", dsnErr("contains NUL")
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// filePath resolves a canonical file path to an absolute form. A path whose
// last element is empty, "." or "..", or that is not already clean
// (filepath.Clean), is rejected.
func filePath(p string) (location, error) {
	if p == "" {
		return location{}, dsnErr("empty path")
	}
	if strings.HasSuffix(p, "/") {
		return location{}, dsnErr("path names a directory")
	}
	base := filepath.Base(p)
	if base == "." || base == ".." || base == "/" {
		return location{}, dsnErr("path names a directory")
	}
	// "a/./b", "a//b" and "x/../b" are refused rather than cleaned: lexical
	// cleaning can name a different file than the kernel resolves (x may
	// be missing or a symlink), and one database must have one spelling.
	if filepath.Clean(p) != p {
		return location{}, dsnErr("path is not canonical (no empty, '.' or '..' elements)")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return location{}, dsnErr("cannot resolve relative path")
	}
	if len(abs) > maxPathBytes {
		return location{}, dsnErr("path too long")
	}
	return location{path: abs}, nil
}

// CheckDSN validates dsn exactly as Open does, without touching the file
// system. A rejection is a *DSNError (matching ErrInvalidDSN) whose Reason
// never contains the DSN, so config loading can refuse a bad database field
// before startup.
func CheckDSN(dsn string) error {
	_, err := parseDSN(dsn)
	return err
}

// fileURI renders an absolute path as a SQLite URI filename, escaping every
// byte outside the unreserved set and '/'.
func fileURI(path string) string {
	const hexdigits = "0123456789abcdef"
	var b strings.Builder
	b.WriteString("file:")
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	return b.String()
}

package gitx

import (
	"bytes"
	"errors"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Bundle header bounds. A header past them is refused before git reads
// the file: a base bundle names one ref and at most MaxBundlePrerequisites
// commits the receiver already has; a candidate bundle one ref and one
// prerequisite.
const (
	MaxBundleHeaderBytes   = 64 << 10
	MaxBundleLineBytes     = 1024
	MaxBundlePrerequisites = 64
	MaxBundleRefs          = 4
)

// bundleSignature is git's v2 bundle signature; v3 (capabilities) is
// never produced for SHA-1 repositories and is refused.
const bundleSignature = "# v2 git bundle\n"

// BundleHeader is a parsed v2 bundle header.
type BundleHeader struct {
	Prerequisites []BundlePrerequisite
	Refs          []BundleRef
	// Size is the header's length in bytes; the pack starts there.
	Size int
}

// BundlePrerequisite is a commit the receiver must already have; Comment
// is whatever git wrote after it (the commit's subject), possibly empty.
type BundlePrerequisite struct {
	SHA     string
	Comment string
}

// BundleRef is one ref a bundle carries.
type BundleRef struct {
	SHA  string
	Name string
}

var errBundleHeader = errors.New("gitx: malformed bundle header")

// ParseBundleHeader parses the start of a bundle file: the v2 signature,
// prerequisite lines "-<sha>[ <comment>]", ref lines "<sha> <ref>", an
// empty line and the pack signature, within the bounds above. Object ids
// are 40 lowercase hex digits, ref names plain (ValidBundleRef), comments
// free of NUL and CR. b may hold more than the header (the pack follows).
// The error is fixed text.
func ParseBundleHeader(b []byte) (BundleHeader, error) {
	var h BundleHeader
	if !bytes.HasPrefix(b, []byte(bundleSignature)) {
		return h, errBundleHeader
	}
	pos := len(bundleSignature)
	for {
		if pos >= MaxBundleHeaderBytes {
			return BundleHeader{}, errBundleHeader
		}
		end := bytes.IndexByte(b[pos:min(len(b), pos+MaxBundleLineBytes+1)], '\n')
		if end < 0 {
			return BundleHeader{}, errBundleHeader
		}
		line := string(b[pos : pos+end])
		pos += end + 1
		if line == "" {
			break
		}
		if rest, ok := strings.CutPrefix(line, "-"); ok {
			if len(h.Refs) > 0 || len(h.Prerequisites) == MaxBundlePrerequisites {
				return BundleHeader{}, errBundleHeader
			}
			sha, comment, hasComment := strings.Cut(rest, " ")
			if !ident.ValidSHA(sha) || (hasComment && (comment == "" || strings.ContainsAny(comment, "\x00\r"))) {
				return BundleHeader{}, errBundleHeader
			}
			h.Prerequisites = append(h.Prerequisites, BundlePrerequisite{SHA: sha, Comment: comment})
			continue
		}
		sha, name, ok := strings.Cut(line, " ")
		if !ok || !ident.ValidSHA(sha) || !ValidBundleRef(name) || len(h.Refs) == MaxBundleRefs {
			return BundleHeader{}, errBundleHeader
		}
		h.Refs = append(h.Refs, BundleRef{SHA: sha, Name: name})
	}
	if len(h.Refs) == 0 || !bytes.HasPrefix(b[pos:], []byte("PACK")) {
		return BundleHeader{}, errBundleHeader
	}
	h.Size = pos
	return h, nil
}

// FormatBundleHeader writes h as ParseBundleHeader reads it (without the
// pack signature).
func FormatBundleHeader(h BundleHeader) []byte {
	var b bytes.Buffer
	b.WriteString(bundleSignature)
	for _, p := range h.Prerequisites {
		b.WriteString("-" + p.SHA)
		if p.Comment != "" {
			b.WriteString(" " + p.Comment)
		}
		b.WriteByte('\n')
	}
	for _, r := range h.Refs {
		b.WriteString(r.SHA + " " + r.Name + "\n")
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// ValidBundleRef reports whether name is a plain full ref name: "refs/"
// then components of letters, digits, '-', '_' and '.', none empty, none
// starting with '.' or ending in ".lock", at most 255 bytes.
func ValidBundleRef(name string) bool {
	rest, ok := strings.CutPrefix(name, "refs/")
	if !ok || len(name) > 255 || rest == "" {
		return false
	}
	for _, c := range strings.Split(rest, "/") {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") {
			return false
		}
		for i := 0; i < len(c); i++ {
			ch := c[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
				return false
			}
		}
	}
	return true
}

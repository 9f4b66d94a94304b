package gitx

import (
	"bytes"
	"errors"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Change is one entry of `git diff-index --raw -z --no-renames` output.
type Change struct {
	OldMode string // six octal digits ("000000" when added)
	NewMode string // six octal digits ("000000" when deleted)
	OldSHA  string // 40 lowercase hex digits
	NewSHA  string // 40 lowercase hex digits (zeros when deleted)
	Status  byte   // 'A', 'D', 'M' or 'T'
	Path    string // repository-relative path, as git prints it
}

// Git modes the Worker cares about.
const (
	ModeSymlink = "120000"
	ModeGitlink = "160000"
)

var errRaw = errors.New("malformed raw diff")

// MaxRawChanges bounds how many entries ParseRaw accepts.
const MaxRawChanges = 1 << 20

// ParseRaw parses NUL-separated raw diff output (as produced with -z and
// --no-renames, so every entry has exactly one path). It returns nil and
// an error on any malformed input.
func ParseRaw(b []byte) ([]Change, error) {
	var out []Change
	for len(b) > 0 {
		if len(out) >= MaxRawChanges {
			return nil, errRaw
		}
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, errRaw
		}
		head := b[:i]
		b = b[i+1:]
		j := bytes.IndexByte(b, 0)
		if j <= 0 {
			return nil, errRaw
		}
		path := string(b[:j])
		b = b[j+1:]
		// ":100644 100644 <40> <40> M"
		if len(head) != 1+6+1+6+1+40+1+40+1+1 || head[0] != ':' ||
			head[7] != ' ' || head[14] != ' ' || head[55] != ' ' || head[96] != ' ' {
			return nil, errRaw
		}
		c := Change{
			OldMode: string(head[1:7]), NewMode: string(head[8:14]),
			OldSHA: string(head[15:55]), NewSHA: string(head[56:96]), Status: head[97], Path: path,
		}
		if !octal(c.OldMode) || !octal(c.NewMode) || !ident.ValidSHA(c.OldSHA) || !ident.ValidSHA(c.NewSHA) {
			return nil, errRaw
		}
		switch c.Status {
		case 'A', 'D', 'M', 'T':
		default:
			return nil, errRaw
		}
		out = append(out, c)
	}
	return out, nil
}

// FormatRaw is the inverse of ParseRaw.
func FormatRaw(cs []Change) []byte {
	var b bytes.Buffer
	for _, c := range cs {
		b.WriteString(":" + c.OldMode + " " + c.NewMode + " " + c.OldSHA + " " + c.NewSHA + " ")
		b.WriteByte(c.Status)
		b.WriteByte(0)
		b.WriteString(c.Path)
		b.WriteByte(0)
	}
	return b.Bytes()
}

func octal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

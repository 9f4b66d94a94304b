package publish

import (
	"github.com/0k-lab/agent-forge/pkg/ident"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Publication limits (GitHub's own title and body limits). The byte
// bound leaves room for a body at its limit written entirely in JSON
// escapes (12 bytes per astral character).
const (
	MaxPublicationBytes = 1 << 20
	MaxTitleRunes       = 256
	MaxBodyRunes        = 65536
	// CandidatePrefix starts every Worker candidate ref.
	CandidatePrefix = ident.CandidateRefPrefix
)

// Publication is the request on stdin, version 1.
type Publication struct {
	Version           int    `json:"version"`
	CandidateSHA      string `json:"candidate_sha"`
	ExpectedParentSHA string `json:"expected_parent_sha"`
	ExpectedTreeSHA   string `json:"expected_tree_sha"`
	CandidateRef      string `json:"candidate_ref"`
	BaseBranch        string `json:"base_branch"`
	NewBranch         string `json:"new_branch"`
	PRTitle           string `json:"pr_title"`
	PRBody            string `json:"pr_body"`
}

// DecodePublication strictly decodes and validates one publication of at
// most MaxPublicationBytes. On error it returns nil and a StageRefused
// publication_invalid error.
func DecodePublication(r io.Reader) (*Publication, error) {
	// Every field is required; pr_body is the only one whose empty value
	// is valid, so its presence is checked through a pointer (strictjson
	// refuses null).
	var w struct {
		Publication
		PRBody *string `json:"pr_body"`
	}
	if err := strictjson.DecodeReader(r, MaxPublicationBytes, &w); err != nil || w.PRBody == nil {
		return nil, fail(StageRefused, CodePublicationBad)
	}
	p := w.Publication
	p.PRBody = *w.PRBody
	if !p.Valid() {
		return nil, fail(StageRefused, CodePublicationBad)
	}
	return &p, nil
}

// Valid reports whether every field of p is well formed.
func (p *Publication) Valid() bool {
	return p.Version == 1 &&
		ident.ValidSHA(p.CandidateSHA) && ident.ValidSHA(p.ExpectedParentSHA) && ident.ValidSHA(p.ExpectedTreeSHA) &&
		p.CandidateSHA != p.ExpectedParentSHA &&
		ident.ValidCandidateRef(p.CandidateRef) &&
		github.SafeBranch(p.BaseBranch) && github.SafeBranch(p.NewBranch) && p.BaseBranch != p.NewBranch &&
		validText(p.PRTitle, 1, MaxTitleRunes, false) && strings.TrimSpace(p.PRTitle) != "" &&
		validText(p.PRBody, 0, MaxBodyRunes, true)
}

// validText: n runes in [lo, hi], no control characters (a body may hold
// newlines, carriage returns and tabs).
func validText(s string, lo, hi int, multiline bool) bool {
	n := utf8.RuneCountInString(s)
	if n < lo || n > hi {
		return false
	}
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			if !multiline {
				return false
			}
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == utf8.RuneError:
			return false
		}
	}
	return true
}

package intake

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Defaults and bounds of a repository's intake section.
const (
	DefaultLabel        = "agent-forge"
	DefaultCommand      = "/forge"
	DefaultMaxFollowups = 5
	MaxFollowups        = 100
	MaxLabelRunes       = 50 // GitHub's own limit on a label name
	MaxCommandBytes     = 32
)

// Merge policies (DECISIONS 18).
const (
	MergeAuto   = "auto"   // delivery merges the exact head after CI
	MergeReview = "review" // after CI, an approving review by an authorised other person first
)

// Config is a repository's "intake" section of gate.json. Absent fields
// take their defaults (Resolve); a field present is validated as given.
type Config struct {
	Label        *string    `json:"label,omitempty"`
	Command      *string    `json:"command,omitempty"`
	Checks       [][]string `json:"checks,omitempty"`
	Merge        *string    `json:"merge,omitempty"`
	MaxFollowups *int       `json:"max_followups,omitempty"`
}

// Settings is a Config with its defaults applied.
type Settings struct {
	Label        string
	Command      string
	Checks       [][]string
	Merge        string
	MaxFollowups int
}

// FieldError names the intake field that failed validation (relative to
// the section) and why, never its value.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// Validate checks c. The checks follow the rules of a coding task's tests
// (wire.ValidateTests): every intake job runs them as its scoped checks.
func (c *Config) Validate() error {
	if c.Label != nil && !validLabel(*c.Label) {
		return fieldErr("label", "must be 1 to 50 characters, trimmed, without commas, control or invisible characters")
	}
	if c.Command != nil && !validCommand(*c.Command) {
		return fieldErr("command", "must be / followed by 1 to 31 lowercase letters, digits or hyphens")
	}
	if err := wire.ValidateTests(c.Checks); err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return fieldErr("checks", fe.Reason)
		}
		return fieldErr("checks", "invalid")
	}
	if c.Merge != nil && *c.Merge != MergeAuto && *c.Merge != MergeReview {
		return fieldErr("merge", `must be "auto" or "review"`)
	}
	if c.MaxFollowups != nil && (*c.MaxFollowups < 0 || *c.MaxFollowups > MaxFollowups) {
		return fieldErr("max_followups", "must be 0 to 100")
	}
	return nil
}

// Resolve returns c's settings with the defaults for absent fields. c must
// have passed Validate.
func (c *Config) Resolve() Settings {
	s := Settings{Label: DefaultLabel, Command: DefaultCommand, Merge: MergeReview, MaxFollowups: DefaultMaxFollowups}
	if c.Label != nil {
		s.Label = *c.Label
	}
	if c.Command != nil {
		s.Command = *c.Command
	}
	if c.Merge != nil {
		s.Merge = *c.Merge
	}
	if c.MaxFollowups != nil {
		s.MaxFollowups = *c.MaxFollowups
	}
	for _, argv := range c.Checks {
		s.Checks = append(s.Checks, append([]string(nil), argv...))
	}
	return s
}

// validLabel: what GitHub accepts as a label name that also survives a
// comma-separated labels query, and shows as it reads.
func validLabel(s string) bool {
	n := utf8.RuneCountInString(s)
	if n == 0 || n > MaxLabelRunes || !utf8.ValidString(s) || strings.TrimSpace(s) != s || strings.ContainsRune(s, ',') {
		return false
	}
	for _, r := range s {
		if Forbidden(r) || r == '\n' || r == '\t' {
			return false
		}
	}
	return true
}

// validCommand: a slash and a short lowercase word, so "starts with the
// command" has one reading.
func validCommand(s string) bool {
	if len(s) < 2 || len(s) > MaxCommandBytes || s[0] != '/' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

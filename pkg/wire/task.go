package wire

import (
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Task bounds. Sizes count UTF-8 bytes.
const (
	MaxInputBytes       = plugin.TextBytes        // text input
	MaxInstructionBytes = plugin.InstructionBytes // coding instruction
	MaxTests            = 32                      // scoped-check commands per task
	MaxTestArgs         = 64                      // argv entries per command
	MaxTestArgBytes     = 4096                    // one argv entry
	MaxTestsBytes       = 65536                   // all argv entries together
	MaxAuthorNameBytes  = 256
	MaxAuthorEmailBytes = 254
)

// TextTask is a text job's task.
type TextTask struct {
	Input string `json:"input"`
}

// CodingTask is a coding job's task. Tests and the author pair are
// optional; the pair is all-or-nothing.
type CodingTask struct {
	RepositoryID      string     `json:"repository_id"`
	BaseSHA           string     `json:"base_sha"`
	Instruction       string     `json:"instruction"`
	Tests             [][]string `json:"tests,omitempty"`
	CommitAuthorName  string     `json:"commit_author_name,omitempty"`
	CommitAuthorEmail string     `json:"commit_author_email,omitempty"`
}

// FieldError names the task or message field that failed validation and
// why, never its value.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// Validate checks a text task.
func (t TextTask) Validate() error {
	if len(t.Input) == 0 || len(t.Input) > MaxInputBytes {
		return fieldErr("input", "must be 1 to 65536 bytes")
	}
	if !utf8.ValidString(t.Input) {
		return fieldErr("input", "must be UTF-8")
	}
	return nil
}

// Validate checks a coding task's shape. Whether the repository is
// registered is the Gate's question, not this one's.
func (t CodingTask) Validate() error {
	if !ident.ValidID(t.RepositoryID) {
		return fieldErr("repository_id", "must be a safe id")
	}
	if !ident.ValidSHA(t.BaseSHA) {
		return fieldErr("base_sha", "must be 40 lowercase hex digits")
	}
	if strings.TrimSpace(t.Instruction) == "" || len(t.Instruction) > MaxInstructionBytes {
		return fieldErr("instruction", "must be non-blank and at most 65536 bytes")
	}
	if !utf8.ValidString(t.Instruction) || strings.ContainsRune(t.Instruction, 0) {
		return fieldErr("instruction", "must be UTF-8 without NUL")
	}
	if err := ValidateTests(t.Tests); err != nil {
		return err
	}
	if (t.CommitAuthorName == "") != (t.CommitAuthorEmail == "") {
		return fieldErr("commit_author_name", "commit_author_name and commit_author_email go together")
	}
	if t.CommitAuthorName != "" {
		if err := validateAuthorName(t.CommitAuthorName); err != nil {
			return err
		}
		if err := validateAuthorEmail(t.CommitAuthorEmail); err != nil {
			return err
		}
	}
	return nil
}

// ValidateTests checks scoped-check commands (a task's tests, an intake's
// checks): at most MaxTests argv lists of 1 to MaxTestArgs UTF-8 arguments
// without NUL, the program non-empty, within MaxTestArgBytes each and
// MaxTestsBytes together. The error is a *FieldError naming "tests".
func ValidateTests(tests [][]string) error {
	if len(tests) > MaxTests {
		return fieldErr("tests", "at most 32 commands")
	}
	total := 0
	for _, argv := range tests {
		if len(argv) == 0 || len(argv) > MaxTestArgs {
			return fieldErr("tests", "each command must have 1 to 64 arguments")
		}
		if argv[0] == "" {
			return fieldErr("tests", "a command's program must be non-empty")
		}
		for _, a := range argv {
			if len(a) > MaxTestArgBytes || strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
				return fieldErr("tests", "each argument must be UTF-8 without NUL, at most 4096 bytes")
			}
			total += len(a)
		}
	}
	if total > MaxTestsBytes {
		return fieldErr("tests", "arguments exceed 65536 bytes in total")
	}
	return nil
}

// headerSafe rejects what would break or forge a Git author header.
func headerSafe(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '<' || r == '>' || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func trimmed(s string) bool { return strings.TrimSpace(s) == s }

// gitCrud reports a byte Git strips from both ends of an identity (its
// "crud": space and controls, . , : ; < > " \ '). An identity that starts
// or ends with one would not become the exact Git Author.
func gitCrud(c byte) bool {
	return c <= ' ' || strings.IndexByte(".,:;<>\"\\'", c) >= 0
}

// gitExact reports whether Git would keep s unchanged as a name or email.
func gitExact(s string) bool { return s != "" && !gitCrud(s[0]) && !gitCrud(s[len(s)-1]) }

func validateAuthorName(name string) error {
	if len(name) > MaxAuthorNameBytes || !trimmed(name) || !headerSafe(name) || !gitExact(name) {
		return fieldErr("commit_author_name", "must be at most 256 bytes, trimmed, without control characters or <>, not starting or ending with punctuation Git strips")
	}
	return nil
}

func validateAuthorEmail(email string) error {
	const reason = "must be a plain address of at most 254 bytes"
	if len(email) > MaxAuthorEmailBytes || !trimmed(email) || !headerSafe(email) || !gitExact(email) || strings.ContainsAny(email, " \t\"(),:;[]\\") {
		return fieldErr("commit_author_email", reason)
	}
	at := strings.LastIndexByte(email, '@')
	if at <= 0 || at == len(email)-1 || strings.Count(email, "@") != 1 {
		return fieldErr("commit_author_email", reason)
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || addr.Name != "" {
		return fieldErr("commit_author_email", reason)
	}
	return nil
}

// taskShape is the union of both task shapes, used to tell them apart.
type taskShape struct {
	Input             *string    `json:"input"`
	RepositoryID      *string    `json:"repository_id"`
	BaseSHA           *string    `json:"base_sha"`
	Instruction       *string    `json:"instruction"`
	Tests             [][]string `json:"tests"`
	CommitAuthorName  *string    `json:"commit_author_name"`
	CommitAuthorEmail *string    `json:"commit_author_email"`
}

// ParsedTask is a submitted task after ParseTask: its kind, its canonical
// encoding (the bytes a lease carries) and, for a coding task, its decoded
// fields (zero for a text task).
type ParsedTask struct {
	Kind      Kind
	Canonical []byte
	Coding    CodingTask
}

// ParseTask strictly decodes a submitted task, decides its kind and
// validates it. A text task has only "input"; a coding task has
// "repository_id", "base_sha" and "instruction" and never "input".
func ParseTask(data []byte) (ParsedTask, error) {
	if p, ok := parseTextTask(data); ok {
		return p, nil
	}
	return parseTask(data)
}

// parseTextTask is ParseTask for a valid text task, which is most
// submissions, without encoding/json: a document that decodes strictly as
// a TextTask with a non-empty input has exactly one member, "input" (an
// empty input is also what a missing one decodes to), so ParseTask would
// take the text branch and accept it if it validates; its canonical
// encoding is the input as encoding/json writes it. It reports false for
// anything else, which parseTask then decides (FuzzParseTaskMatches).
func parseTextTask(data []byte) (ParsedTask, bool) {
	t, err := decodeTextTask(data)
	if err != nil || t.Input == "" || t.Validate() != nil {
		return ParsedTask{}, false
	}
	b := make([]byte, 0, len(`{"input":}`)+len(t.Input)+len(t.Input)/8+2)
	b = append(b, `{"input":`...)
	b = strictjson.AppendString(b, t.Input)
	return ParsedTask{Kind: KindText, Canonical: append(b, '}')}, true
}

// parseTask is ParseTask for any document.
func parseTask(data []byte) (ParsedTask, error) {
	var s taskShape
	if err := strictjson.Decode(data, &s); err != nil {
		return ParsedTask{}, err
	}
	coding := s.RepositoryID != nil || s.BaseSHA != nil || s.Instruction != nil || s.Tests != nil ||
		s.CommitAuthorName != nil || s.CommitAuthorEmail != nil
	if s.Input != nil {
		if coding {
			return ParsedTask{}, fieldErr("input", "a task is either text (input) or coding, not both")
		}
		t := TextTask{Input: *s.Input}
		if err := t.Validate(); err != nil {
			return ParsedTask{}, err
		}
		b, err := marshal(t)
		if err != nil {
			return ParsedTask{}, err
		}
		return ParsedTask{Kind: KindText, Canonical: b}, nil
	}
	switch {
	case s.RepositoryID == nil:
		return ParsedTask{}, fieldErr("repository_id", "required (or input for a text task)")
	case s.BaseSHA == nil:
		return ParsedTask{}, fieldErr("base_sha", "required")
	case s.Instruction == nil:
		return ParsedTask{}, fieldErr("instruction", "required")
	}
	t := CodingTask{RepositoryID: *s.RepositoryID, BaseSHA: *s.BaseSHA, Instruction: *s.Instruction, Tests: s.Tests}
	if len(t.Tests) == 0 {
		t.Tests = nil // as the canonical encoding (which omits it) decodes
	}
	if s.CommitAuthorName != nil {
		t.CommitAuthorName = *s.CommitAuthorName
		if t.CommitAuthorName == "" {
			return ParsedTask{}, fieldErr("commit_author_name", "must not be empty")
		}
	}
	if s.CommitAuthorEmail != nil {
		t.CommitAuthorEmail = *s.CommitAuthorEmail
		if t.CommitAuthorEmail == "" {
			return ParsedTask{}, fieldErr("commit_author_email", "must not be empty")
		}
	}
	if err := t.Validate(); err != nil {
		return ParsedTask{}, err
	}
	b, err := marshal(t)
	if err != nil {
		return ParsedTask{}, err
	}
	return ParsedTask{Kind: KindCoding, Canonical: b, Coding: t}, nil
}

// DecodeTextTask strictly decodes and validates a text task.
func DecodeTextTask(data []byte) (TextTask, error) {
	t, err := decodeTextTask(data)
	if err != nil {
		return TextTask{}, err
	}
	if err := t.Validate(); err != nil {
		return TextTask{}, err
	}
	return t, nil
}

// DecodeCodingTask strictly decodes and validates a coding task.
func DecodeCodingTask(data []byte) (CodingTask, error) {
	var t CodingTask
	if err := strictjson.Decode(data, &t); err != nil {
		return CodingTask{}, err
	}
	if err := t.Validate(); err != nil {
		return CodingTask{}, err
	}
	return t, nil
}

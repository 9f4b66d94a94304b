package plugin

import (
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Frame is one decoded v1 frame. Only the fields of its Type (and, for
// execute, its Operation) may be set; Validate rejects any other non-zero
// field. The version is implicit: every Frame is a v1 frame.
//
// Fields per type:
//
//	initialize   Capabilities, Limits
//	initialized  Capabilities
//	execute      Operation, and Input (text) or Workspace, Instruction, TimeoutMS (workspace_edit)
//	progress     Sequence, Stage, Text
//	result       Output (text) or any of CommitSubject, Summary+Changes (workspace_edit)
//	failure      Category
//	cancel       none
type Frame struct {
	ID   string
	Type Type

	Capabilities []Capability // initialize (offer), initialized (selection)
	Limits       Limits       // initialize

	Operation   Operation // execute
	Input       string    // execute text
	Workspace   string    // execute workspace_edit
	Instruction string    // execute workspace_edit
	TimeoutMS   int64     // execute workspace_edit

	Sequence int64  // progress
	Stage    Stage  // progress
	Text     string // progress

	Output        *string  // text result; nil when absent
	CommitSubject *string  // workspace result; nil when absent
	Summary       *string  // workspace result agent report; nil when absent
	Changes       []string // workspace result agent report; nil when absent

	Category Category // failure
}

// field bits: which optional frame fields are set.
const (
	fCapabilities = 1 << iota
	fLimits
	fOperation
	fInput
	fWorkspace
	fInstruction
	fTimeoutMS
	fSequence
	fStage
	fText
	fOutput
	fCommitSubject
	fSummary
	fChanges
	fCategory
)

// present returns the set of non-zero optional fields of f.
func (f *Frame) present() int {
	m := 0
	set := func(ok bool, bit int) {
		if ok {
			m |= bit
		}
	}
	set(f.Capabilities != nil, fCapabilities)
	set(f.Limits != Limits{}, fLimits)
	set(f.Operation != "", fOperation)
	set(f.Input != "", fInput)
	set(f.Workspace != "", fWorkspace)
	set(f.Instruction != "", fInstruction)
	set(f.TimeoutMS != 0, fTimeoutMS)
	set(f.Sequence != 0, fSequence)
	set(f.Stage != "", fStage)
	set(f.Text != "", fText)
	set(f.Output != nil, fOutput)
	set(f.CommitSubject != nil, fCommitSubject)
	set(f.Summary != nil, fSummary)
	set(f.Changes != nil, fChanges)
	set(f.Category != "", fCategory)
	return m
}

// Validate checks every rule of f that does not depend on the session: the
// header, the exact field set of its type, and each value. Rules that need
// the session (matching id, negotiated capabilities, order, progress
// numbering) are checked by Session.Accept.
func (f *Frame) Validate() error {
	if !ident.ValidHexID(f.ID) {
		return invalid("id is not 32 lowercase hex digits")
	}
	// Zero-valued optional fields (empty input/text) are legal values, so a
	// Frame can only prove that nothing *foreign* is set.
	allowed := 0
	switch f.Type {
	case TypeInitialize:
		allowed = fCapabilities | fLimits
	case TypeInitialized:
		allowed = fCapabilities
	case TypeExecute:
		allowed = fOperation
		switch f.Operation {
		case OpText:
			allowed |= fInput
		case OpWorkspaceEdit:
			allowed |= fWorkspace | fInstruction | fTimeoutMS
		}
	case TypeProgress:
		allowed = fSequence | fStage | fText
	case TypeResult:
		allowed = fOutput | fCommitSubject | fSummary | fChanges
	case TypeFailure:
		allowed = fCategory
	case TypeCancel:
	default:
		return invalid("unknown frame type")
	}
	if extra := f.present() &^ allowed; extra != 0 {
		return invalid("%s frame carries a field of another frame type", f.Type)
	}
	switch f.Type {
	case TypeInitialize:
		if err := validateOffer(f.Capabilities); err != nil {
			return err
		}
		if f.Limits != V1Limits() {
			return invalid("limits differ from the v1 limits")
		}
	case TypeInitialized:
		if err := validateCapabilityList(f.Capabilities, "selection"); err != nil {
			return err
		}
	case TypeExecute:
		return f.validateExecute()
	case TypeProgress:
		if f.Sequence < 1 || f.Sequence > ProgressFrames {
			return invalid("progress sequence out of range")
		}
		if !f.Stage.Valid() {
			return invalid("unknown progress stage")
		}
		if err := checkText(f.Text, ProgressTextBytes, "progress text"); err != nil {
			return err
		}
	case TypeResult:
		return f.validateResult()
	case TypeFailure:
		if !f.Category.Valid() {
			return invalid("unknown failure category")
		}
	}
	return nil
}

func validateOffer(caps []Capability) error {
	return validateCapabilityList(caps, "offer")
}

// validateCapabilityList checks a list is non-empty, duplicate-free, from
// the closed set, and names at least one operation.
func validateCapabilityList(caps []Capability, what string) error {
	if len(caps) == 0 {
		return invalid("capability %s is empty", what)
	}
	seen := make(map[Capability]bool, len(caps))
	op := false
	for _, c := range caps {
		if !c.Valid() {
			return invalid("unknown capability in %s", what)
		}
		if seen[c] {
			return invalid("duplicate capability in %s", what)
		}
		seen[c] = true
		if c == CapText || c == CapWorkspaceEdit {
			op = true
		}
	}
	if !op {
		return invalid("capability %s names no operation", what)
	}
	return nil
}

func (f *Frame) validateExecute() error {
	switch f.Operation {
	case OpText:
		return checkText(f.Input, TextBytes, "input")
	case OpWorkspaceEdit:
		if err := checkWorkspace(f.Workspace); err != nil {
			return err
		}
		if f.Instruction == "" {
			return invalid("instruction is empty")
		}
		if err := checkText(f.Instruction, InstructionBytes, "instruction"); err != nil {
			return err
		}
		if f.TimeoutMS < 1 || f.TimeoutMS > MaxTimeoutMS {
			return invalid("timeout_ms out of range")
		}
		return nil
	}
	return invalid("unknown operation")
}

func checkWorkspace(p string) error {
	if err := checkText(p, WorkspaceBytes, "workspace"); err != nil {
		return err
	}
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return invalid("workspace is not an absolute clean path")
	}
	return nil
}

func (f *Frame) validateResult() error {
	if f.Output != nil {
		// present() already guarantees nothing but result fields; a text
		// result carries output alone.
		if f.CommitSubject != nil || f.Summary != nil || f.Changes != nil {
			return invalid("result mixes text and workspace fields")
		}
		return checkText(*f.Output, TextBytes, "output")
	}
	if f.CommitSubject != nil {
		if err := CheckCommitSubject(*f.CommitSubject); err != nil {
			return err
		}
	}
	if (f.Summary == nil) != (f.Changes == nil) {
		return invalid("agent report needs both summary and changes")
	}
	if f.Summary != nil {
		return CheckReport(*f.Summary, f.Changes)
	}
	return nil
}

func checkText(s string, limit int, what string) error {
	if len(s) > limit {
		return invalid("%s exceeds %d bytes", what, limit)
	}
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", what)
	}
	return nil
}

// CheckCommitSubject applies the v1 commit_subject rules: 1..256 UTF-8
// bytes, no leading or trailing Unicode white space, no control or format
// characters, no U+2028/U+2029, hence a single line.
func CheckCommitSubject(s string) error {
	if s == "" {
		return invalid("commit_subject is empty")
	}
	if err := checkText(s, CommitSubjectBytes, "commit_subject"); err != nil {
		return err
	}
	return checkLine(s, "commit_subject")
}

// CheckReport applies the v1 agent report rules: a non-empty summary of at
// most 1024 bytes and 1..12 non-empty changes of at most 256 bytes each, all
// trimmed, without control or format characters or U+2028/U+2029.
func CheckReport(summary string, changes []string) error {
	if summary == "" {
		return invalid("summary is empty")
	}
	if err := checkText(summary, SummaryBytes, "summary"); err != nil {
		return err
	}
	if err := checkLine(summary, "summary"); err != nil {
		return err
	}
	if len(changes) < 1 || len(changes) > MaxChanges {
		return invalid("changes must hold 1 to %d entries", MaxChanges)
	}
	for _, c := range changes {
		if c == "" {
			return invalid("change is empty")
		}
		if err := checkText(c, ChangeBytes, "change"); err != nil {
			return err
		}
		if err := checkLine(c, "change"); err != nil {
			return err
		}
	}
	return nil
}

// checkLine rejects surrounding white space, control and format characters
// and the Unicode line and paragraph separators. s is valid UTF-8.
func checkLine(s, what string) error {
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return invalid("%s has leading or trailing white space", what)
	}
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return invalid("%s contains a control, format or line separator character", what)
		}
	}
	return nil
}

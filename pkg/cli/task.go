package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// maxTaskBytes bounds a task file; the Gate refuses larger bodies too.
const maxTaskBytes = 1 << 20

// maxTextBytes bounds a text task's input and a coding instruction.
const maxTextBytes = 65536

// Task is a submit body: exactly one of the two documented shapes.
// Text: input. Coding: repository_id, base_sha, instruction, optional tests
// and an optional commit author pair.
type Task struct {
	Input             *string     `json:"input,omitempty"`
	RepositoryID      *string     `json:"repository_id,omitempty"`
	BaseSHA           *string     `json:"base_sha,omitempty"`
	Instruction       *string     `json:"instruction,omitempty"`
	Tests             *[][]string `json:"tests,omitempty"`
	CommitAuthorName  *string     `json:"commit_author_name,omitempty"`
	CommitAuthorEmail *string     `json:"commit_author_email,omitempty"`
}

// DecodeTask strictly decodes and shape-checks a task document. The Gate
// validates values fully; this catches the wrong shape before sending.
// Errors name fields, never values.
func DecodeTask(data []byte) (*Task, error) {
	var t Task
	if err := strictjson.Decode(data, &t); err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Validate checks that t is exactly one task shape with plausible values.
func (t *Task) Validate() error {
	coding := t.RepositoryID != nil || t.BaseSHA != nil || t.Instruction != nil ||
		t.Tests != nil || t.CommitAuthorName != nil || t.CommitAuthorEmail != nil
	switch {
	case t.Input != nil && coding:
		return errors.New("task mixes the text field input with coding fields")
	case t.Input != nil:
		if len(*t.Input) == 0 || len(*t.Input) > maxTextBytes {
			return fmt.Errorf("input must be 1..%d bytes", maxTextBytes)
		}
		return nil
	case !coding:
		return errors.New("task must be {\"input\"} (text) or {\"repository_id\",\"base_sha\",\"instruction\",…} (coding)")
	}
	switch {
	case t.RepositoryID == nil || !ident.ValidID(*t.RepositoryID):
		return fieldErr("repository_id")
	case t.BaseSHA == nil || !ident.ValidSHA(*t.BaseSHA):
		return errors.New("base_sha must be a full 40-character lowercase hex commit id")
	case t.Instruction == nil || len(*t.Instruction) == 0 || len(*t.Instruction) > maxTextBytes:
		return fmt.Errorf("instruction must be 1..%d bytes", maxTextBytes)
	case (t.CommitAuthorName == nil) != (t.CommitAuthorEmail == nil):
		return errors.New("commit_author_name and commit_author_email go together")
	}
	if t.Tests != nil {
		for i, argv := range *t.Tests {
			if len(argv) == 0 {
				return fmt.Errorf("tests/%d must be a non-empty argv array", i)
			}
		}
	}
	return nil
}

// encode returns the canonical compact body that is sent.
func (t *Task) encode() ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil || !utf8.Valid(b) {
		return nil, errors.New("encode task")
	}
	return b, nil
}

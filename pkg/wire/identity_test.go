package wire

import (
	"errors"
	"strings"
	"testing"
)

// Identities Git would alter (it strips "crud" from both ends) are refused
// at submission, so a supplied identity is always the exact Git Author.
func TestAuthorIdentityGitExact(t *testing.T) {
	task := func(name, email string) CodingTask {
		return CodingTask{RepositoryID: "r", BaseSHA: strings.Repeat("a", 40), Instruction: "x",
			CommitAuthorName: name, CommitAuthorEmail: email}
	}
	for _, ok := range [][2]string{
		{"Ada Lovelace", "ada@example.org"}, {"Zoë Ünicode", "z@example.org"}, {"O'Brien", "o.brien@example.org"},
		{"kricha", "4619899+kricha@users.noreply.github.com"},
	} {
		if err := task(ok[0], ok[1]).Validate(); err != nil {
			t.Errorf("%q <%q> refused: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{
		{"Ada.", "ada@example.org"}, {".Ada", "ada@example.org"}, {"Ada,", "ada@example.org"},
		{"'Ada'", "ada@example.org"}, {"Ada;", "ada@example.org"}, {"Ada:", "ada@example.org"},
		{"Ada", "'ada@example.org"}, {"Ada", "ada@example.org'"},
	} {
		var fe *FieldError
		if err := task(bad[0], bad[1]).Validate(); err == nil || !errors.As(err, &fe) {
			t.Errorf("%q <%q> accepted", bad[0], bad[1])
		}
	}
}

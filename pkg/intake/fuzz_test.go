package intake

import (
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// FuzzIntakeInstruction: whatever the issue holds, the instruction is
// bounded, UTF-8, free of forbidden runes and HTML comment openers, its
// frame intact, the same every time, and plain text in the body survives.
// Seeds: testdata/fuzz/FuzzIntakeInstruction.
func FuzzIntakeInstruction(f *testing.F) {
	f.Add("title", "body", "alice", "comment", "/forge go", uint8(1))
	f.Fuzz(func(t *testing.T, title, body, author, comment, request string, kind uint8) {
		kinds := []string{store.TriggerLabel, store.TriggerComment, store.TriggerReviewComment, "other"}
		in := Issue{Repository: "octo-org/hello", Number: 1, Title: title, Body: body, Author: author,
			Comments: []Comment{{Author: author, Body: comment}, {Author: "bob", Body: body + comment}},
			Trigger: Trigger{Kind: kinds[int(kind)%len(kinds)], Actor: author, Text: request,
				Path: title, Line: int(kind), DiffHunk: comment}}
		out := Instruction(in)
		checkInvariants(t, out)
		if out != Instruction(in) {
			t.Fatal("not deterministic")
		}
		if StartsWithCommand(request, "/forge") {
			text, _ := clean(request, MaxRawPartBytes)
			if !strings.Contains(text, "/forge") {
				t.Fatal("a command matched that the text does not show")
			}
		}
		if plain := "keep-" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' {
				return r
			}
			return -1
		}, body); len(plain) < 1000 && !strings.Contains(Instruction(Issue{Body: plain}), "\n"+plain+"\n") {
			t.Fatal("plain text lost")
		} else if len(plain) < 1000 && !StartsWithCommand("/forge "+plain, "/forge") {
			t.Fatal("a plain command not matched")
		}
	})
}

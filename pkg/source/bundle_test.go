package source

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func commitFixture() Candidate {
	return Candidate{Base: strings.Repeat("b", 40), Tree: strings.Repeat("a", 40),
		Author: "Agent Forge <forge@example.invalid>", Committer: "Agent Forge <forge@example.invalid>"}
}

func TestCheckCommitHeaders(t *testing.T) {
	c := commitFixture()
	good, err := os.ReadFile("testdata/commit/good.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCommitHeaders(good, c); err != nil {
		t.Fatalf("good commit refused: %v", err)
	}
	g := string(good)
	for name, tc := range map[string]struct{ raw, reason string }{
		"two parents":     {mustRead(t, "two-parents.txt"), ReasonBundleHeaders},
		"signature":       {mustRead(t, "gpgsig.txt"), ReasonBundleHeaders},
		"other parent":    {strings.Replace(g, "parent "+c.Base, "parent "+strings.Repeat("c", 40), 1), ReasonBundleParent},
		"other tree":      {strings.Replace(g, "tree "+c.Tree, "tree "+strings.Repeat("c", 40), 1), ReasonBundleTree},
		"other author":    {strings.Replace(g, "author Agent Forge", "author Mallory", 1), ReasonBundleIdentity},
		"local zone":      {strings.Replace(g, "1700000000 +0000\ncommitter", "1700000000 +0200\ncommitter", 1), ReasonBundleIdentity},
		"no message":      {strings.TrimSuffix(strings.Split(g, "\n\n")[0], "\n"), ReasonBundleHeaders},
		"encoding":        {strings.Replace(g, "\n\n", "\nencoding latin1\n\n", 1), ReasonBundleHeaders},
		"letters in date": {strings.Replace(g, "1700000000 +0000\ncommitter", "17000x0000 +0000\ncommitter", 1), ReasonBundleIdentity},
	} {
		var be *BundleError
		if err := checkCommitHeaders([]byte(tc.raw), c); !errors.As(err, &be) || be.Reason != tc.reason {
			t.Errorf("%s: %v, want %s", name, err, tc.reason)
		}
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "commit", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Whatever a candidate's commit holds, the check answers a refusal or
// accepts exactly the headers it was told.
func FuzzCheckCommitHeaders(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/commit/*.txt")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	c := commitFixture()
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := checkCommitHeaders(raw, c)
		if err == nil {
			head, _, _ := strings.Cut(string(raw), "\n\n")
			lines := strings.Split(head, "\n")
			if len(lines) != 4 || lines[0] != "tree "+c.Tree || lines[1] != "parent "+c.Base ||
				!strings.HasPrefix(lines[2], "author "+c.Author+" ") || !strings.HasPrefix(lines[3], "committer "+c.Committer+" ") {
				t.Fatalf("accepted %q", raw)
			}
			return
		}
		var be *BundleError
		if !errors.As(err, &be) {
			t.Fatalf("not a refusal: %v", err)
		}
	})
}

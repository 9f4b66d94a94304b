package worker

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSafeTreePath(t *testing.T) {
	for p, want := range map[string]bool{
		"a.txt": true, "dir/a.txt": true, ".github/workflows/ci.yml": true, ".gitignore": true,
		"": false, "/abs": false, "a/../b": false, "./a": false, "a//b": false,
		".git/config": false, "sub/.GIT/x": false, ".git./x": false, ".git /x": false, "a\\b": false,
	} {
		if got := safeTreePath(p); got != want {
			t.Errorf("safeTreePath(%q) = %v", p, got)
		}
	}
}

func TestLinkInside(t *testing.T) {
	for _, tc := range []struct {
		link, target string
		want         bool
	}{
		{"a", "b", true},
		{"dir/a", "../b", true},
		{"dir/a", "sub/../x", true},
		{"dir/a", "..", true},
		{"a", ".", true},
		{"a", "..", false},
		{"dir/a", "../../b", false},
		{"a", "/etc/passwd", false},
		{"a", "", false},
		{"a", ".git/hooks/pre-commit", false},
		{"dir/a", "../.GIT", false},
	} {
		if got := linkInside(tc.link, tc.target); got != tc.want {
			t.Errorf("linkInside(%q, %q) = %v", tc.link, tc.target, got)
		}
	}
}

func TestNextBlob(t *testing.T) {
	sha := "0123456789012345678901234567890123456789"
	b := []byte(sha + " blob 3\nabc\n" + sha + " blob 0\n\n")
	v, rest, ok := nextBlob(b, sha)
	if !ok || string(v) != "abc" {
		t.Fatalf("first: %q %v", v, ok)
	}
	v, rest, ok = nextBlob(rest, sha)
	if !ok || len(v) != 0 || len(rest) != 0 {
		t.Fatalf("second: %q %q %v", v, rest, ok)
	}
	for _, bad := range []string{"", sha + " blob 3\nab", sha + " tree 3\nabc\n", sha + " blob x\n", sha + " blob 3\nabcd"} {
		if _, _, ok := nextBlob([]byte(bad), sha); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

func codingSeeds(f *testing.F, pattern string) {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "coding", pattern))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzNextBlob: never panics; a parsed entry is a prefix of the input and
// the rest is exactly what follows it.
func FuzzNextBlob(f *testing.F) {
	codingSeeds(f, "blob-*.bin")
	const sha = "0123456789012345678901234567890123456789"
	f.Fuzz(func(t *testing.T, b []byte) {
		v, rest, ok := nextBlob(b, sha)
		if !ok {
			if v != nil || rest != nil {
				t.Fatal("failure with a result")
			}
			return
		}
		head := sha + " blob " + strconv.Itoa(len(v)) + "\n"
		if string(b) != head+string(v)+"\n"+string(rest) {
			t.Fatal("entry does not reassemble to the input")
		}
	})
}

// FuzzLinkInside: an accepted link never resolves above the tree or into
// a Git directory, and safe paths never contain traversal or .git.
func FuzzLinkInside(f *testing.F) {
	codingSeeds(f, "link-*.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		link, target, _ := strings.Cut(string(b), "\x00")
		if safeTreePath(link) {
			for _, c := range strings.Split(link, "/") {
				if c == ".." || c == "." || c == "" || strings.EqualFold(c, ".git") {
					t.Fatalf("unsafe path accepted: %q", link)
				}
			}
		}
		if !linkInside(link, target) {
			return
		}
		r := path.Clean(path.Join(path.Dir(link), target))
		if strings.HasPrefix(r, "/") || r == ".." || strings.HasPrefix(r, "../") {
			t.Fatalf("escaping link accepted: %q -> %q", link, target)
		}
		for _, c := range strings.Split(r, "/") {
			if strings.EqualFold(c, ".git") {
				t.Fatalf("link into .git accepted: %q -> %q", link, target)
			}
		}
	})
}

// identitiesExact is the Worker's own guard (defence in depth behind the
// submission rule): the commit header must carry exactly the identities.
func TestIdentitiesExact(t *testing.T) {
	raw := "tree t\nparent p\nauthor Ada <a@b.c> 1 +0000\ncommitter Agent Forge <forge@example.invalid> 1 +0000\n\nmsg\nauthor X\n"
	if !identitiesExact([]byte(raw), "Ada <a@b.c> 1 +0000", "Agent Forge <forge@example.invalid> 1 +0000") {
		t.Fatal("exact identities refused")
	}
	if identitiesExact([]byte(raw), "Ada. <a@b.c> 1 +0000", "Agent Forge <forge@example.invalid> 1 +0000") {
		t.Fatal("an altered author accepted")
	}
	if identitiesExact([]byte("tree t\n\n"), "a", "b") {
		t.Fatal("a header without identities accepted")
	}
}

package worker

import "testing"

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

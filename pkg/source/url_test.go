package source

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseURLAccepts(t *testing.T) {
	for _, tc := range []struct{ name, url, owner, repo string }{
		{"plain", "https://github.com/0k-lab/agent-forge.git", "0k-lab", "agent-forge"},
		{"case kept", "https://github.com/Octo-Org/Hello_World.git", "Octo-Org", "Hello_World"},
		{"dot repository", "https://github.com/octo/.github.git", "octo", ".github"},
		{"dots inside", "https://github.com/octo/a.b.c.git", "octo", "a.b.c"},
		{"one letter", "https://github.com/a/b.git", "a", "b"},
		{"longest names", "https://github.com/" + strings.Repeat("o", 39) + "/" + strings.Repeat("r", 100) + ".git",
			strings.Repeat("o", 39), strings.Repeat("r", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseURL(tc.url)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if u.Owner != tc.owner || u.Repo != tc.repo || u.String() != tc.url {
				t.Fatalf("got %+v (%s)", u, u.String())
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"empty", ""},
		{"credentials", "https://user:pass@github.com/octo/repo.git"},
		{"user only", "https://user@github.com/octo/repo.git"},
		{"token user", "https://x-access-token@github.com/octo/repo.git"},
		{"port", "https://github.com:443/octo/repo.git"},
		{"empty port", "https://github.com:/octo/repo.git"},
		{"query", "https://github.com/octo/repo.git?x=1"},
		{"empty query", "https://github.com/octo/repo.git?"},
		{"fragment", "https://github.com/octo/repo.git#main"},
		{"percent escape", "https://github.com/octo/re%70o.git"},
		{"escaped slash", "https://github.com/octo%2Frepo.git"},
		{"missing .git", "https://github.com/octo/repo"},
		{"trailing slash", "https://github.com/octo/repo.git/"},
		{"trailing slash no .git", "https://github.com/octo/repo/"},
		{"empty owner", "https://github.com//repo.git"},
		{"empty repo", "https://github.com/octo/.git"},
		{"dot repo", "https://github.com/octo/..git"},
		{"dot dot repo", "https://github.com/octo/...git"},
		{"dot owner", "https://github.com/./repo.git"},
		{"dot dot owner", "https://github.com/../repo.git"},
		{"dot segment", "https://github.com/octo/./repo.git"},
		{"dot dot segment", "https://github.com/octo/../repo.git"},
		{"extra segment", "https://github.com/octo/sub/repo.git"},
		{"owner only", "https://github.com/octo.git"},
		{"double slash", "https://github.com/octo//repo.git"},
		{"http", "http://github.com/octo/repo.git"},
		{"ssh", "ssh://git@github.com/octo/repo.git"},
		{"scp form", "git@github.com:octo/repo.git"},
		{"git scheme", "git://github.com/octo/repo.git"},
		{"file", "file:///srv/octo/repo.git"},
		{"other host", "https://gitlab.com/octo/repo.git"},
		{"www alias", "https://www.github.com/octo/repo.git"},
		{"api host", "https://api.github.com/octo/repo.git"},
		{"trailing dot host", "https://github.com./octo/repo.git"},
		{"suffix host", "https://github.com.evil.example/octo/repo.git"},
		{"ip host", "https://140.82.112.3/octo/repo.git"},
		{"uppercase scheme", "HTTPS://github.com/octo/repo.git"},
		{"mixed scheme", "Https://github.com/octo/repo.git"},
		{"uppercase host", "https://GitHub.com/octo/repo.git"},
		{"uppercase host all", "https://GITHUB.COM/octo/repo.git"},
		{"uppercase suffix", "https://github.com/octo/repo.GIT"},
		{"leading space", " https://github.com/octo/repo.git"},
		{"trailing space", "https://github.com/octo/repo.git "},
		{"trailing newline", "https://github.com/octo/repo.git\n"},
		{"leading tab", "\thttps://github.com/octo/repo.git"},
		{"inner space", "https://github.com/octo/re po.git"},
		{"backslash", "https://github.com/octo\\repo.git"},
		{"nul", "https://github.com/octo/re\x00po.git"},
		{"unicode", "https://github.com/octo/rep\u00f6.git"},
		{"fullwidth host", "https://ｇithub.com/octo/repo.git"},
		{"owner leading hyphen", "https://github.com/-octo/repo.git"},
		{"owner trailing hyphen", "https://github.com/octo-/repo.git"},
		{"owner underscore", "https://github.com/oc_to/repo.git"},
		{"owner dot", "https://github.com/oc.to/repo.git"},
		{"owner too long", "https://github.com/" + strings.Repeat("o", 40) + "/repo.git"},
		{"repo too long", "https://github.com/octo/" + strings.Repeat("r", 101) + ".git"},
		{"repo double .git", "https://github.com/octo/repo.git.git"},
		{"repo plus", "https://github.com/octo/re+po.git"},
		{"repo tilde", "https://github.com/octo/~repo.git"},
		{"no scheme", "github.com/octo/repo.git"},
		{"scheme relative", "//github.com/octo/repo.git"},
		{"three slashes", "https:///github.com/octo/repo.git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseURL(tc.url)
			if err != ErrURL {
				t.Fatalf("accepted as %+v (err %v)", u, err)
			}
			if u != (URL{}) {
				t.Fatalf("partial result %+v", u)
			}
		})
	}
}

func TestDirName(t *testing.T) {
	const url = "https://github.com/0k-lab/agent-forge.git"
	sum := sha256.Sum256([]byte(url))
	want := hex.EncodeToString(sum[:]) + ".git"
	if got := DirName(url); got != want || !IsDirName(got) {
		t.Fatalf("DirName = %q, want %q", got, want)
	}
	if got := Dir("/srv/forge/public", url); got != "/srv/forge/public/"+want {
		t.Fatalf("Dir = %q", got)
	}
	for _, bad := range []string{"", ".git", want[:64], strings.ToUpper(want[:64]) + ".git", want + "/", "x" + want[1:]} {
		if IsDirName(bad) {
			t.Fatalf("IsDirName(%q) = true", bad)
		}
	}
}

// FuzzParseURL: whatever ParseURL accepts is exactly its canonical form,
// made only of the allowed bytes, and bounded; refusals carry no value.
func FuzzParseURL(f *testing.F) {
	f.Add("https://github.com/0k-lab/agent-forge.git")
	f.Add("https://user@github.com/octo/repo.git")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURL(s)
		if err != nil {
			if err != ErrURL || u != (URL{}) {
				t.Fatalf("refusal: %v %+v", err, u)
			}
			return
		}
		if u.String() != s || len(s) > MaxURLBytes {
			t.Fatalf("accepted %q as %q", s, u.String())
		}
		if !strings.HasPrefix(s, "https://github.com/") || strings.Count(s, "/") != 4 ||
			strings.ContainsAny(s[len("https://"):], "@:?#%\\ \t\r\n") {
			t.Fatalf("accepted a non-canonical shape %q", s)
		}
		for _, c := range []byte(u.Owner + u.Repo) {
			if !(alnum(c) || c == '-' || c == '_' || c == '.') {
				t.Fatalf("accepted byte %q in %q", c, s)
			}
		}
		if again, err := ParseURL(u.String()); err != nil || again != u {
			t.Fatalf("not idempotent: %q", s)
		}
	})
}

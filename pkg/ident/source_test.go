package ident

import (
	"strings"
	"testing"
)

func TestParsePublicURLAccepts(t *testing.T) {
	for _, tc := range []struct{ name, url, owner, repo string }{
		{"plain", "https://github.com/0k-lab/agent-forge.git", "0k-lab", "agent-forge"},
		{"case kept", "https://github.com/Octo-Org/Hello_World.git", "Octo-Org", "Hello_World"},
		{"dot repository", "https://github.com/octo/.github.git", "octo", ".github"},
		{"dots inside", "https://github.com/octo/a.b.c.git", "octo", "a.b.c"},
		{"hyphens apart", "https://github.com/a-b-c/x-.git", "a-b-c", "x-"},
		{"wiki inside", "https://github.com/octo/wiki.page.git", "octo", "wiki.page"},
		{"one letter", "https://github.com/a/b.git", "a", "b"},
		{"longest names", "https://github.com/" + strings.Repeat("o", 39) + "/" + strings.Repeat("r", 100) + ".git",
			strings.Repeat("o", 39), strings.Repeat("r", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner, repo, ok := ParsePublicURL(tc.url)
			if !ok || owner != tc.owner || repo != tc.repo {
				t.Fatalf("got %q %q %v", owner, repo, ok)
			}
		})
	}
}

func TestParsePublicURLRefuses(t *testing.T) {
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
		{"owner double hyphen", "https://github.com/oc--to/repo.git"},
		{"owner only hyphen", "https://github.com/-/repo.git"},
		{"repo ending .git in another case", "https://github.com/octo/repo.GIT.git"},
		{"repo ending .wiki", "https://github.com/octo/repo.wiki.git"},
		{"repo ending .WIKI", "https://github.com/octo/repo.WIKI.git"},
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
			owner, repo, ok := ParsePublicURL(tc.url)
			if ok || owner != "" || repo != "" {
				t.Fatalf("accepted as %q %q (%v)", owner, repo, ok)
			}
		})
	}
}

func TestValidPreparedName(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4) + ".git"
	if !ValidPreparedName(good) {
		t.Fatalf("refused %q", good)
	}
	for _, bad := range []string{"", ".git", good[:64], strings.ToUpper(good[:64]) + ".git", good + "/", "x" + good[1:], good[1:], "repo.git"} {
		if ValidPreparedName(bad) {
			t.Fatalf("ValidPreparedName(%q) = true", bad)
		}
	}
}

func TestValidRepositoryPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/srv/forge/public/x.git": true, "/a": true, "/srv/with space/r.git": true,
		"": false, "/": false, "srv/r": false, "/srv/": false, "/srv//r": false, "/srv/./r": false, "/srv/../r": false,
		"/srv/.": false, "/srv/..": false, `/srv/"r`: false, `/srv/\r`: false, "/srv/<r>": false, "/srv/a&b": false,
		"/srv/r\n": false, "/srv/\x7f": false, "/srv/\u00e9": false, "/" + strings.Repeat("a", MaxRepositoryPathBytes): false,
	} {
		if got := ValidRepositoryPath(p); got != want {
			t.Errorf("ValidRepositoryPath(%q) = %v", p, got)
		}
	}
}

// FuzzParsePublicURL: whatever ParsePublicURL accepts is exactly its
// canonical form, made only of the allowed bytes, and bounded.
func FuzzParsePublicURL(f *testing.F) {
	f.Add("https://github.com/0k-lab/agent-forge.git")
	f.Add("https://user@github.com/octo/repo.git")
	f.Fuzz(func(t *testing.T, s string) {
		owner, repo, ok := ParsePublicURL(s)
		if !ok {
			if owner != "" || repo != "" {
				t.Fatalf("partial result %q %q", owner, repo)
			}
			return
		}
		if "https://github.com/"+owner+"/"+repo+".git" != s || len(s) > MaxPublicURLBytes {
			t.Fatalf("accepted %q as %q %q", s, owner, repo)
		}
		if !strings.HasPrefix(s, "https://github.com/") || strings.Count(s, "/") != 4 ||
			strings.ContainsAny(s[len("https://"):], "@:?#%\\ \t\r\n") {
			t.Fatalf("accepted a non-canonical shape %q", s)
		}
		if strings.Contains(owner, "--") || strings.HasSuffix(strings.ToLower(repo), ".git") || strings.HasSuffix(strings.ToLower(repo), ".wiki") {
			t.Fatalf("accepted a name GitHub does not give: %q", s)
		}
		for _, c := range []byte(owner + repo) {
			if !(alnum(c) || c == '-' || c == '_' || c == '.') {
				t.Fatalf("accepted byte %q in %q", c, s)
			}
		}
		if o2, r2, ok := ParsePublicURL(s); !ok || o2 != owner || r2 != repo {
			t.Fatalf("not deterministic: %q", s)
		}
	})
}

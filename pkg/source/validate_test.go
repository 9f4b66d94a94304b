package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckConfig(t *testing.T) {
	const ok = "core.repositoryformatversion\n0\x00core.filemode\ntrue\x00core.bare\ntrue\x00remote.origin.url\n" + testURL + "\x00"
	for _, tc := range []struct{ name, list, want string }{
		{"as prepared", ok, ""},
		{"no origin", "core.bare\ntrue\x00", ReasonOriginMismatch},
		{"other url", strings.Replace(ok, testURL, "https://github.com/evil/app.git", 1), ReasonOriginMismatch},
		{"two origins", ok + "remote.origin.url\n" + testURL + "\x00", ReasonOriginMismatch},
		{"second remote", ok + "remote.other.url\n" + testURL + "\x00", ReasonOriginMismatch},
		{"fetch refspec", ok + "remote.origin.fetch\n+refs/*:refs/*\x00", ReasonOriginMismatch},
		{"url rewrite", ok + "url.https://evil.example/.insteadof\nhttps://github.com/\x00", ReasonUnexpectedConfig},
		{"proxy", ok + "http.proxy\nhttp://evil.example\x00", ReasonUnexpectedConfig},
		{"include", ok + "include.path\n/dev/null\x00", ReasonUnexpectedConfig},
		{"key without value", ok + "core.sshcommand\x00", ReasonUnexpectedConfig},
		{"url with trailing newline", strings.Replace(ok, testURL, testURL+"\n", 1), ReasonOriginMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkConfig([]byte(tc.list), testURL); got != tc.want {
				t.Fatalf("checkConfig = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzCheckConfig: a listing is accepted only when every key is allowed
// and it names exactly one origin, at exactly the URL.
func FuzzCheckConfig(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "config-list", "*"))
	if len(seeds) == 0 {
		f.Fatal("no seeds under testdata/config-list")
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, list []byte) {
		reason := checkConfig(list, testURL)
		if reason != "" && reason != ReasonOriginMismatch && reason != ReasonUnexpectedConfig {
			t.Fatalf("reason %q", reason)
		}
		if reason != "" {
			return
		}
		origins := 0
		for _, e := range strings.Split(string(list), "\x00") {
			if e == "" {
				continue
			}
			k, v, _ := strings.Cut(e, "\n")
			if !allowedConfig[k] {
				t.Fatalf("accepted key %q", k)
			}
			if k == "remote.origin.url" {
				origins++
				if v != testURL {
					t.Fatalf("accepted origin %q", v)
				}
			}
		}
		if origins != 1 {
			t.Fatalf("accepted %d origins", origins)
		}
	})
}

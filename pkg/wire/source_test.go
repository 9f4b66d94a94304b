package wire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBundleRequestQueries(t *testing.T) {
	a, b, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	bind := AttemptBinding{Lane: "worker-1#1", Generation: strings.Repeat("0", 32), JobID: "job-1", AttemptID: "att-1"}
	sr := SourceRequest{AttemptBinding: bind, Want: a, Haves: []string{b, c}}
	got, err := ParseSourceRequest(sr.Query())
	if err != nil || got.Lane != "worker-1#1" || got.Want != a || len(got.Haves) != 2 || got.Haves[1] != c {
		t.Fatalf("%+v %v (%s)", got, err, sr.Query())
	}
	cr := CandidateRequest{AttemptBinding: bind, Candidate: b, Tree: c}
	if got, err := ParseCandidateRequest(cr.Query()); err != nil || got != cr {
		t.Fatalf("%+v %v", got, err)
	}
	q := sr.Query()
	for name, raw := range map[string]string{
		"empty":           "",
		"reordered":       strings.Replace(q, "lane=", "xlane=", 1),
		"unescaped hash":  strings.Replace(q, "%23", "#", 1),
		"want twice":      q + "&want=" + a,
		"have is want":    q + "&have=" + a,
		"have twice":      q + "&have=" + b,
		"short have":      q + "&have=" + b[:39],
		"bad generation":  strings.Replace(q, strings.Repeat("0", 32), strings.Repeat("0", 31), 1),
		"upper want":      strings.Replace(q, a, strings.ToUpper(a), 1),
		"extra key":       q + "&x=1",
		"trailing amp":    q + "&",
		"too many haves":  q + strings.Repeat("&have="+c, MaxHaves),
		"escaped key":     strings.Replace(q, "want=", "w%61nt=", 1),
		"needless escape": strings.Replace(q, "job-1", "job%2D1", 1),
	} {
		if _, err := ParseSourceRequest(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseCandidateRequest(cr.Query() + "&tree=" + c); err == nil {
		t.Error("candidate request with two trees accepted")
	}
	if _, err := ParseCandidateRequest(sr.Query()); err == nil {
		t.Error("source query accepted as a candidate request")
	}
}

func FuzzParseBundleRequests(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bundle-request/*")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.TrimSuffix(string(b), "\n"))
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if r, err := ParseSourceRequest(raw); err == nil {
			if r.Query() != raw || len(r.Haves) > MaxHaves {
				t.Fatalf("accepted source query is not canonical: %q", raw)
			}
		}
		if r, err := ParseCandidateRequest(raw); err == nil && r.Query() != raw {
			t.Fatalf("accepted candidate query is not canonical: %q", raw)
		}
	})
}

package github

import (
	"reflect"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/testseed"
)

func TestParserSeeds(t *testing.T) {
	for name, data := range testseed.Read(t, "testdata/seed/commit-*") {
		c, err := ParseCommit(data)
		if bad := strings.Contains(name, "-bad-"); bad != (err != nil) {
			t.Errorf("%s: err %v", name, err)
		}
		if name == "commit-merge-signed.txt" && len(c.Parents) != 2 {
			t.Errorf("%s: parents %v", name, c.Parents)
		}
	}
	for name, data := range testseed.Read(t, "testdata/seed/pulls-*") {
		prs, err := ParsePulls(data, "o", "r")
		if bad := strings.Contains(name, "-bad-"); bad != (err != nil) {
			t.Errorf("%s: err %v", name, err)
		}
		if name == "pulls-merged-deleted-fork.json" && (len(prs) != 1 || !prs[0].Merged || prs[0].HeadRepo != "") {
			t.Errorf("%s: %+v", name, prs)
		}
	}
	for name, data := range testseed.Read(t, "testdata/seed/redact-*") {
		if got := Redact(string(data)); strings.Contains(got, "ghs_0") || strings.Contains(got, "eyJhbGci") || strings.Contains(got, "github_pat_1") {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// FuzzParseCommit: never panics; on error returns nothing; an accepted
// commit has one full tree SHA and full parent SHAs.
func FuzzParseCommit(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/commit-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCommit(data)
		if err != nil {
			if !reflect.DeepEqual(c, Commit{}) {
				t.Fatal("error with a result")
			}
			return
		}
		if !ident.ValidSHA(c.Tree) {
			t.Fatal("bad tree accepted")
		}
		for _, p := range c.Parents {
			if !ident.ValidSHA(p) {
				t.Fatal("bad parent accepted")
			}
		}
	})
}

// FuzzParsePulls: never panics; on error returns nothing; every accepted
// PR is well formed.
func FuzzParsePulls(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/pulls-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		prs, err := ParsePulls(data, "o", "r")
		if err != nil {
			if prs != nil {
				t.Fatal("error with a result")
			}
			return
		}
		for _, p := range prs {
			if p.Number <= 0 || (p.State != "open" && p.State != "closed") || !ident.ValidSHA(p.HeadSHA) ||
				!strings.EqualFold(p.URL, GitBase+"/o/r/pull/"+itoa64(int64(p.Number))) {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}

// FuzzRedact: never panics; redacting is idempotent, and no GitHub token
// prefix followed by a token character survives.
func FuzzRedact(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/redact-*") {
		f.Add(string(d))
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Redact(s)
		if Redact(r) != r {
			t.Fatalf("not idempotent: %q", s)
		}
		for i := 0; i < len(r); i++ {
			if n := tokenAt(r[i:]); n > 0 {
				t.Fatalf("token survives in %q", r)
			}
		}
	})
}

// FuzzParseRemoteBranch: never panics; a found branch is one full SHA
// listed under exactly the asked name; the seeds are classified right.
func FuzzParseRemoteBranch(f *testing.F) {
	const ref = "refs/heads/forge/job-1"
	for name, d := range testseed.Read(f, "testdata/seed/lsremote-*") {
		sha, ok, err := parseRemoteBranch(d, ref)
		if bad := strings.Contains(name, "-bad-"); bad != (err != nil) {
			f.Errorf("%s: err %v", name, err)
		}
		if name == "lsremote-tail-match.txt" && (!ok || sha != "2222222222222222222222222222222222222222") {
			f.Errorf("%s: %q %v", name, sha, ok)
		}
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sha, ok, err := parseRemoteBranch(data, ref)
		if err != nil && (ok || sha != "") || ok != (sha != "") {
			t.Fatalf("inconsistent %q %v %v", sha, ok, err)
		}
		if ok && (!ident.ValidSHA(sha) || !strings.Contains(string(data), sha+"\t"+ref)) {
			t.Fatalf("found %q", sha)
		}
	})
}

// FuzzHasNextPage: never panics; the seeds named link-next* have a next
// page and the others do not.
func FuzzHasNextPage(f *testing.F) {
	for name, d := range testseed.Read(f, "testdata/seed/link-*") {
		if want := strings.HasPrefix(name, "link-next"); hasNextPage([]string{string(d)}) != want {
			f.Errorf("%s: want %v", name, want)
		}
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if hasNextPage([]string{string(data)}) && !strings.Contains(strings.ToLower(string(data)), "next") {
			t.Fatal("next without next")
		}
	})
}

// FuzzErrorMessage: never panics; the private message is bounded; the
// seeds' classes are read (a field error as "field code").
func FuzzErrorMessage(f *testing.F) {
	seeds := testseed.Read(f, "testdata/seed/error-*")
	for _, d := range seeds {
		f.Add(d)
	}
	want := map[string]string{"error-head-invalid.json": "head invalid", "error-no-commits.json": "No commits between",
		"error-base-modified.json": "Base branch was modified"}
	for name, phrase := range want {
		if !strings.Contains(errorMessage(seeds[name]), phrase) {
			f.Errorf("%s: %q lacks %q", name, errorMessage(seeds[name]), phrase)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if m := errorMessage(data); len(m) > maxMessageBytes {
			t.Fatalf("%d bytes", len(m))
		}
	})
}

func TestIssueParserSeeds(t *testing.T) {
	check := func(prefix string, parse func([]byte) (int, error)) {
		for name, data := range testseed.Read(t, "testdata/seed/"+prefix+"-*") {
			n, err := parse(data)
			if bad := strings.Contains(name, "-bad-"); bad != (err != nil) || !bad && n == 0 {
				t.Errorf("%s: %d items, err %v", name, n, err)
			}
		}
	}
	check("issues", func(b []byte) (int, error) { l, err := ParseIssues(b); return len(l), err })
	check("comments", func(b []byte) (int, error) { l, err := ParseIssueComments(b, "o", "r"); return len(l), err })
	check("events", func(b []byte) (int, error) { l, err := ParseIssueEvents(b); return len(l), err })
}

// FuzzParseIssues: never panics; an error returns nothing; an accepted
// issue has a number in range, a known state and bounded names.
func FuzzParseIssues(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/issues-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseIssues(data)
		if err != nil {
			if list != nil {
				t.Fatal("error with a result")
			}
			return
		}
		for _, i := range list {
			if i.Number <= 0 || i.Number > maxGitHubID || (i.State != "open" && i.State != "closed") ||
				len(i.User.Login) > maxNameBytes || i.UpdatedAt.IsZero() {
				t.Fatalf("accepted %+v", i)
			}
			for _, l := range i.Labels {
				if len(l) > maxNameBytes {
					t.Fatal("long label accepted")
				}
			}
		}
	})
}

// FuzzParseIssueComments: an accepted comment belongs to an issue of o/r
// in range and has an id in range.
func FuzzParseIssueComments(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/comments-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseIssueComments(data, "o", "r")
		if err != nil {
			if list != nil {
				t.Fatal("error with a result")
			}
			return
		}
		for _, c := range list {
			if c.ID <= 0 || c.ID > maxGitHubID || c.IssueNumber <= 0 || c.IssueNumber > maxGitHubID || c.CreatedAt.IsZero() {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}

// FuzzParseIssueEvents: an accepted event has an id in range, a bounded
// kind and label, and a time.
func FuzzParseIssueEvents(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/events-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseIssueEvents(data)
		if err != nil {
			if list != nil {
				t.Fatal("error with a result")
			}
			return
		}
		for _, e := range list {
			if e.ID <= 0 || e.ID > maxGitHubID || e.Event == "" || len(e.Event) > maxNameBytes || len(e.Label) > maxNameBytes || e.CreatedAt.IsZero() {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}

package github

import (
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/testseed"
)

func TestRunsSeeds(t *testing.T) {
	for name, data := range testseed.Read(t, "testdata/seed/runs-*") {
		total, runs, err := parseRuns(data)
		if bad := strings.Contains(name, "-bad-"); bad != (err != nil) {
			t.Errorf("%s: err %v", name, err)
		}
		if name == "runs-two.json" && (total != 2 || len(runs) != 2 || runs[0].Conclusion != "success" || runs[1].Conclusion != "") {
			t.Errorf("%s: %d %+v", name, total, runs)
		}
	}
}

// FuzzParseRuns: never panics; on error returns nothing; every accepted
// run is well formed and the count covers the page.
func FuzzParseRuns(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/runs-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		total, runs, err := parseRuns(data)
		if err != nil {
			if total != 0 || runs != nil {
				t.Fatal("error with a result")
			}
			return
		}
		if total < len(runs) || len(runs) > runsPerPage {
			t.Fatalf("count %d for %d runs", total, len(runs))
		}
		for _, r := range runs {
			if r.ID <= 0 || !ident.ValidSHA(r.HeadSHA) || r.Status == "" || len(r.Status) > maxRunStrBytes || len(r.Conclusion) > maxRunStrBytes {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

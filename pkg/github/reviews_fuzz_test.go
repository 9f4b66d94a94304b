package github

import (
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/testseed"
)

func TestReviewSeeds(t *testing.T) {
	for name, data := range testseed.Read(t, "testdata/seed/reviews-*") {
		list, err := ParseReviews(data)
		if bad := strings.Contains(name, "-bad-"); bad != (err != nil) {
			t.Errorf("%s: err %v", name, err)
		}
		if name == "reviews-approved-dismissed.json" && (len(list) != 3 || list[0].State != ReviewApproved ||
			list[0].User.Login != "carol" || list[1].State != ReviewDismissed || list[2].CommitID != "" || list[2].User.Login != "") {
			t.Errorf("%s: %+v", name, list)
		}
	}
	for name, data := range testseed.Read(t, "testdata/seed/reviewcomments-*") {
		list, err := ParseReviewComments(data, "o", "r")
		if bad := strings.Contains(name, "-bad-"); bad != (err != nil) {
			t.Errorf("%s: err %v", name, err)
		}
		if name == "reviewcomments-two.json" && (len(list) != 2 || list[0].PullNumber != 3 || list[0].Line != 2 ||
			list[0].Path != "README" || list[1].Line != 0 || list[1].PullNumber != 4) {
			t.Errorf("%s: %+v", name, list)
		}
	}
}

// FuzzParseReviews: an accepted review has an id in range, a known state
// and a full commit SHA or none.
func FuzzParseReviews(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/reviews-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseReviews(data)
		if err != nil {
			if list != nil {
				t.Fatal("error with a result")
			}
			return
		}
		for _, r := range list {
			switch r.State {
			case ReviewApproved, ReviewChangesRequested, ReviewCommented, ReviewDismissed, ReviewPending:
			default:
				t.Fatalf("state %q accepted", r.State)
			}
			if r.ID <= 0 || r.ID > maxGitHubID || (r.CommitID != "" && !ident.ValidSHA(r.CommitID)) || len(r.User.Login) > maxNameBytes {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

// FuzzParseReviewComments: an accepted review comment belongs to a pull
// request of o/r in range, has an id and line in range and bounded parts.
func FuzzParseReviewComments(f *testing.F) {
	for _, d := range testseed.Read(f, "testdata/seed/reviewcomments-*") {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseReviewComments(data, "o", "r")
		if err != nil {
			if list != nil {
				t.Fatal("error with a result")
			}
			return
		}
		for _, c := range list {
			if c.ID <= 0 || c.ID > maxGitHubID || c.PullNumber <= 0 || c.PullNumber > maxGitHubID || c.Line < 0 ||
				len(c.Path) > maxReviewCommentPart || len(c.DiffHunk) > maxReviewCommentPart || c.UpdatedAt.IsZero() {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}

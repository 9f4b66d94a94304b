package githubfake

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
)

// pkg/github's review calls (merge policy review, follow-ups) against
// the fake: a pull request's reviews, conditionally, and the
// repository-wide review-comment feed.
func TestFakeAnswersTheReviewClient(t *testing.T) {
	a := newAPIFixture(t, intakePerms)
	api, c := a.api, a.client
	ctx := context.Background()
	a.seed(t, "octo/app")
	work := t.TempDir()
	if out, err := a.git(t, "", "clone", "-q", filepath.Join(a.root, "octo/app.git"), work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(work, "README"), []byte("hello\nworld\n"), 0o644)
	for _, args := range [][]string{{"commit", "-qam", "change"}, {"push", "-q", "origin", "HEAD:refs/heads/forge/job-1"}} {
		if out, err := a.git(t, work, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, _ := a.git(t, work, "rev-parse", "HEAD")
	head := strings.TrimSpace(out)
	tok, err := c.CreateToken(ctx, a.jwt(t), 77, "app", github.DerivePermissions(nil))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := c.CreatePull(ctx, tok, "octo", "app", "forge/job-1", "main", "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	id, err := api.ReviewComment("octo", "app", pr.Number, "bob", "README", 2, "/forge louder")
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.ListReviewCommentsSince(ctx, tok, "octo", "app", since, 100, "")
	if err != nil || len(page.Items) != 1 || page.Full || page.ETag == "" {
		t.Fatalf("review comments: %+v %v", page, err)
	}
	rc := page.Items[0]
	if rc.ID != id || rc.PullNumber != pr.Number || rc.Path != "README" || rc.Line != 2 || rc.User.Login != "bob" ||
		rc.Body != "/forge louder" || !strings.HasPrefix(rc.DiffHunk, "@@") {
		t.Fatalf("review comment %+v", rc)
	}
	if again, err := c.ListReviewCommentsSince(ctx, tok, "octo", "app", since, 100, page.ETag); err != nil || !again.NotModified {
		t.Fatalf("conditional review comments: %+v %v", again, err)
	}

	if _, err := api.Review("octo", "app", pr.Number, "carol", "APPROVED", "", ""); err != nil {
		t.Fatal(err)
	}
	reviews, err := c.ListReviews(ctx, tok, "octo", "app", pr.Number, "")
	if err != nil || reviews.ETag == "" || len(reviews.Items) != 2 {
		t.Fatalf("reviews: %+v %v", reviews, err)
	}
	if r := reviews.Items[1]; r.State != github.ReviewApproved || r.CommitID != head || r.User.Login != "carol" || r.User.Type != "User" {
		t.Fatalf("approval %+v", r)
	}
	same, err := c.ListReviews(ctx, tok, "octo", "app", pr.Number, reviews.ETag)
	if err != nil || !same.NotModified {
		t.Fatalf("conditional reviews: %+v %v", same, err)
	}
	api.Review("octo", "app", pr.Number, "dave", "CHANGES_REQUESTED", "", "no")
	if changed, err := c.ListReviews(ctx, tok, "octo", "app", pr.Number, reviews.ETag); err != nil || changed.NotModified || len(changed.Items) != 3 {
		t.Fatalf("reviews after a new one: %+v %v", changed, err)
	}
	if _, err := c.ListReviews(ctx, tok, "octo", "app", 999, ""); !github.IsClass(err, github.ClassNotFound) {
		t.Fatalf("reviews of no pull request: %v", err)
	}
}

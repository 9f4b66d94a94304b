package github

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const apiIssues = "https://api.github.com/repos/o/r/issues/"

func issueObj(n int, updated string, extra map[string]any) map[string]any {
	m := map[string]any{"number": n, "title": "t", "body": "b", "state": "open",
		"user":       map[string]any{"login": "alice", "type": "User"},
		"labels":     []any{map[string]any{"name": "agent-forge", "color": "ededed"}},
		"created_at": "2026-01-01T00:00:00Z", "updated_at": updated, "author_association": "OWNER"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestListIssuesSince(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var got *http.Request
	status := 200
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("ETag", `W/"abc"`)
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4990")
		w.Header().Set("X-RateLimit-Reset", "1700003600")
		if status == 304 {
			w.WriteHeader(304)
			return
		}
		writeJSON(w, 200, []any{
			issueObj(1, "2026-01-02T03:04:05Z", map[string]any{"body": nil, "labels": []any{"bug", map[string]any{"name": "Agent-Forge"}}}),
			issueObj(2, "2026-01-02T03:05:00Z", map[string]any{"pull_request": map[string]any{"url": "x"}, "state": "closed"}),
		})
	})
	ctx := context.Background()
	p, err := c.ListIssuesSince(ctx, testToken(), "o", "r", since, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	q := got.URL.Query()
	if got.URL.Path != "/repos/o/r/issues" || q.Get("state") != "all" || q.Get("sort") != "updated" || q.Get("direction") != "asc" ||
		q.Get("since") != "2026-01-02T03:04:05Z" || q.Get("per_page") != "2" || got.Header.Get("If-None-Match") != "" ||
		got.Header.Get("Authorization") != "Bearer "+tokenValue {
		t.Fatalf("request %s %v", got.URL, got.Header)
	}
	if len(p.Items) != 2 || !p.Full || p.ETag != `W/"abc"` || p.Rate.Remaining != 4990 || p.NotModified {
		t.Fatalf("page %+v", p)
	}
	a, b := p.Items[0], p.Items[1]
	if a.Body != "" || a.IsPull || !a.HasLabel("agent-forge") || a.HasLabel("agent") || len(a.Labels) != 2 || a.User.Login != "alice" ||
		!a.UpdatedAt.Equal(since) || !b.IsPull || b.State != "closed" {
		t.Fatalf("issues %+v", p.Items)
	}
	status = 304
	p, err = c.ListIssuesSince(ctx, testToken(), "o", "r", since, 100, `W/"abc"`)
	if err != nil || !p.NotModified || p.ETag != `W/"abc"` || p.Items != nil || got.Header.Get("If-None-Match") != `W/"abc"` {
		t.Fatalf("304: %+v %v", p, err)
	}
	// A 304 to an unconditional request cannot be believed.
	if _, err := c.ListIssuesSince(ctx, testToken(), "o", "r", since, 100, ""); !IsClass(err, ClassMalformed) {
		t.Fatalf("unasked 304: %v", err)
	}
	for _, bad := range []func() error{
		func() error {
			_, err := c.ListIssuesSince(ctx, testToken(), "o", "r", time.Time{}, 100, "")
			return err
		},
		func() error { _, err := c.ListIssuesSince(ctx, testToken(), "o", "r", since, 101, ""); return err },
		func() error { _, err := c.ListIssuesSince(ctx, testToken(), "o", "r", since, 10, "a\nb"); return err },
		func() error { _, err := c.ListIssuesSince(ctx, nil, "o", "r", since, 10, ""); return err },
		func() error { _, err := c.ListIssuesSince(ctx, testToken(), "o", "../x", since, 10, ""); return err },
	} {
		got = nil
		if err := bad(); !IsClass(err, ClassMalformed) || got != nil {
			t.Fatalf("bad input: %v, sent %v", err, got != nil)
		}
	}
}

func TestFeedRefusals(t *testing.T) {
	since := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter)
		class Class
	}{
		{"malformed entry", func(w http.ResponseWriter) {
			writeJSON(w, 200, []any{issueObj(0, "2026-01-01T00:00:00Z", nil)})
		}, ClassMalformed},
		{"bad time", func(w http.ResponseWriter) { writeJSON(w, 200, []any{issueObj(1, "yesterday", nil)}) }, ClassMalformed},
		{"bad state", func(w http.ResponseWriter) {
			writeJSON(w, 200, []any{issueObj(1, "2026-01-01T00:00:00Z", map[string]any{"state": "gone"})})
		}, ClassMalformed},
		{"more than asked", func(w http.ResponseWriter) {
			writeJSON(w, 200, []any{issueObj(1, "2026-01-01T00:00:00Z", nil), issueObj(2, "2026-01-01T00:00:00Z", nil)})
		}, ClassMalformed},
		{"not a list", func(w http.ResponseWriter) { writeJSON(w, 200, map[string]any{"message": "x"}) }, ClassMalformed},
		{"limit", func(w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "1700000100")
			writeJSON(w, 403, map[string]string{"message": "API rate limit exceeded"})
		}, ClassRateLimited},
		{"permission", func(w http.ResponseWriter) {
			writeJSON(w, 403, map[string]string{"message": "Resource not accessible by integration"})
		}, ClassPermission},
		{"too large", func(w http.ResponseWriter) {
			w.WriteHeader(200)
			io.WriteString(w, "["+strings.Repeat(" ", MaxResponseBytes)+"]")
		}, ClassTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) { n++; tc.serve(w) })
			_, err := c.ListIssuesSince(ctx, testToken(), "o", "r", since, 1, "")
			if !IsClass(err, tc.class) || n != 1 || len(clk.sleeps) != 0 {
				t.Fatalf("err %v after %d requests, sleeps %v", err, n, clk.sleeps)
			}
			if tc.class == ClassRateLimited && err.(*APIError).RetryAfter != 101*time.Second {
				t.Fatalf("retry after %v", err.(*APIError).RetryAfter)
			}
		})
	}
}

func commentObj(id int64, issueURL string) map[string]any {
	return map[string]any{"id": id, "body": "/forge go", "user": map[string]any{"login": "bob", "type": "User"},
		"issue_url": issueURL, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01Z"}
}

func TestListIssueCommentsSince(t *testing.T) {
	var got *http.Request
	body := []any{commentObj(11, apiIssues+"7"), commentObj(12, "https://API.github.com/repos/O/R/issues/8")}
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) { got = r; writeJSON(w, 200, body) })
	ctx := context.Background()
	p, err := c.ListIssueCommentsSince(ctx, testToken(), "o", "r", time.Unix(1_700_000_000, 0), 100, "")
	if err != nil {
		t.Fatal(err)
	}
	q := got.URL.Query()
	if got.URL.Path != "/repos/o/r/issues/comments" || q.Get("sort") != "updated" || q.Get("direction") != "asc" || q.Has("state") ||
		q.Get("since") != "2023-11-14T22:13:20Z" {
		t.Fatalf("request %s", got.URL)
	}
	if len(p.Items) != 2 || p.Full || p.Items[0].IssueNumber != 7 || p.Items[1].IssueNumber != 8 || p.Items[0].ID != 11 ||
		p.Items[0].Body != "/forge go" || p.Items[0].UpdatedAt.Sub(p.Items[0].CreatedAt) != time.Second {
		t.Fatalf("page %+v", p)
	}
	for _, u := range []string{"https://api.github.com/repos/o/other/issues/7", apiIssues + "07", apiIssues + "7/x", apiIssues, apiIssues + "-1",
		"https://evil.example/repos/o/r/issues/7"} {
		body = []any{commentObj(11, u)}
		if _, err := c.ListIssueCommentsSince(ctx, testToken(), "o", "r", time.Unix(1_700_000_000, 0), 100, ""); !IsClass(err, ClassMalformed) {
			t.Errorf("issue_url %q: %v", u, err)
		}
	}
}

func TestIssueEventsPages(t *testing.T) {
	requests := 0
	pagesServed := 3
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		requests++
		page := r.URL.Query().Get("page")
		if r.URL.Path != "/repos/o/r/issues/5/events" || r.URL.Query().Get("per_page") != "100" {
			t.Errorf("request %s", r.URL)
		}
		if page != itoa64(int64(pagesServed)) {
			w.Header().Set("Link", `<https://api.github.com/repositories/1/issues/5/events?page=2>; rel="next"`)
		}
		writeJSON(w, 200, []any{
			map[string]any{"id": 100 + requests, "event": "labeled", "actor": map[string]any{"login": "m", "type": "User"},
				"label": map[string]any{"name": "agent-forge"}, "created_at": "2026-01-01T00:00:00Z"},
			map[string]any{"id": 200 + requests, "event": "closed", "actor": nil, "created_at": "2026-01-01T00:00:00Z"},
		})
	})
	evs, err := c.IssueEvents(context.Background(), testToken(), "o", "r", 5)
	if err != nil || len(evs) != 6 || requests != 3 || evs[0].Label != "agent-forge" || evs[0].Actor.Login != "m" || evs[1].Actor.Login != "" {
		t.Fatalf("events %+v %v after %d", evs, err, requests)
	}
	// More than ten pages: no partial view.
	requests, pagesServed = 0, 11
	if _, err := c.IssueEvents(context.Background(), testToken(), "o", "r", 5); !IsClass(err, ClassMalformed) || requests != 10 {
		t.Fatalf("eleven pages: %v after %d", err, requests)
	}
}

func TestIssueCommentsOfOneIssue(t *testing.T) {
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []any{commentObj(1, apiIssues+"5"), commentObj(2, apiIssues+"6")})
	})
	// A comment of another issue in the answer is not believed.
	if _, err := c.IssueComments(context.Background(), testToken(), "o", "r", 5); !IsClass(err, ClassMalformed) {
		t.Fatalf("foreign comment: %v", err)
	}
}

func TestPermission(t *testing.T) {
	var status int
	var answer map[string]any
	var path string
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.EscapedPath()
		writeJSON(w, status, answer)
	})
	ctx := context.Background()
	status, answer = 200, map[string]any{"permission": "write", "role_name": "maintain", "user": map[string]any{"login": "Alice", "type": "User"}}
	p, err := c.Permission(ctx, testToken(), "o", "r", "alice")
	if err != nil || p.Permission != "write" || p.RoleName != "maintain" || p.User.Type != "User" || path != "/repos/o/r/collaborators/alice/permission" {
		t.Fatalf("%+v %v %s", p, err, path)
	}
	status, answer = 404, map[string]any{"message": "Not Found"}
	if p, err := c.Permission(ctx, testToken(), "o", "r", "nobody"); err != nil || p.Permission != "none" || p.RoleName != "none" {
		t.Fatalf("404: %+v %v", p, err)
	}
	status, answer = 200, map[string]any{"permission": "admin", "role_name": "admin", "user": map[string]any{"login": "mallory"}}
	if _, err := c.Permission(ctx, testToken(), "o", "r", "alice"); !IsClass(err, ClassMalformed) {
		t.Fatalf("another user's answer: %v", err)
	}
	path = ""
	if _, err := c.Permission(ctx, testToken(), "o", "r", "../admin"); !IsClass(err, ClassMalformed) || path != "" {
		t.Fatalf("bad login: %v, sent %q", err, path)
	}
	answer = map[string]any{"permission": "write", "role_name": "write", "user": map[string]any{"login": "dependabot[bot]", "type": "Bot"}}
	if _, err := c.Permission(ctx, testToken(), "o", "r", "dependabot[bot]"); err != nil || path != "/repos/o/r/collaborators/dependabot%5Bbot%5D/permission" {
		t.Fatalf("bot login: %v %s", err, path)
	}
}

func TestAddReaction(t *testing.T) {
	var reqs []string
	status := 201
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs = append(reqs, r.Method+" "+r.URL.Path+" "+strings.TrimSpace(string(b)))
		writeJSON(w, status, map[string]any{"id": 1, "content": "eyes"})
	})
	ctx := context.Background()
	for _, target := range []string{ReactIssue, ReactComment, ReactReviewComment} {
		if err := c.AddReaction(ctx, testToken(), "o", "r", target, 9, ReactionEyes); err != nil {
			t.Fatal(err)
		}
	}
	status = 200 // already there
	if err := c.AddReaction(ctx, testToken(), "o", "r", ReactIssue, 9, ReactionPlusOne); err != nil {
		t.Fatal(err)
	}
	want := []string{`POST /repos/o/r/issues/9/reactions {"content":"eyes"}`, `POST /repos/o/r/issues/comments/9/reactions {"content":"eyes"}`,
		`POST /repos/o/r/pulls/comments/9/reactions {"content":"eyes"}`, `POST /repos/o/r/issues/9/reactions {"content":"+1"}`}
	if strings.Join(reqs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s", strings.Join(reqs, "\n"))
	}
	for _, bad := range [][2]string{{"pull", ReactionEyes}, {ReactIssue, "rocket"}, {ReactIssue, ""}} {
		if err := c.AddReaction(ctx, testToken(), "o", "r", bad[0], 9, bad[1]); !IsClass(err, ClassMalformed) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}

func TestStatusCommentCalls(t *testing.T) {
	var reqs []string
	status := 201
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		reqs = append(reqs, r.Method+" "+r.URL.Path)
		if status >= 500 {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, map[string]any{"id": 77, "body": "x", "user": map[string]any{"login": "forge[bot]", "type": "Bot"},
			"issue_url": apiIssues + "5", "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
	})
	ctx := context.Background()
	cm, err := c.CreateIssueComment(ctx, testToken(), "o", "r", 5, "accepted")
	if err != nil || cm.ID != 77 || cm.IssueNumber != 5 {
		t.Fatalf("%+v %v", cm, err)
	}
	if _, err := c.CreateIssueComment(ctx, testToken(), "o", "r", 6, "accepted"); !IsClass(err, ClassMalformed) {
		t.Fatalf("a comment on another issue: %v", err)
	}
	status = 200
	if cm, err := c.EditIssueComment(ctx, testToken(), "o", "r", 77, "running"); err != nil || cm.ID != 77 {
		t.Fatalf("%+v %v", cm, err)
	}
	if _, err := c.EditIssueComment(ctx, testToken(), "o", "r", 78, "running"); !IsClass(err, ClassMalformed) {
		t.Fatalf("another comment's answer: %v", err)
	}
	want := "POST /repos/o/r/issues/5/comments\nPOST /repos/o/r/issues/6/comments\nPATCH /repos/o/r/issues/comments/77\nPATCH /repos/o/r/issues/comments/78"
	if strings.Join(reqs, "\n") != want {
		t.Fatalf("requests\n%s", strings.Join(reqs, "\n"))
	}
	// A creation with an uncertain outcome is never repeated; an edit is.
	reqs, status = nil, 502
	if _, err := c.CreateIssueComment(ctx, testToken(), "o", "r", 5, "x"); !IsClass(err, ClassServer) || len(reqs) != 1 {
		t.Fatalf("create after 502: %v, %d requests", err, len(reqs))
	}
	reqs = nil
	if _, err := c.EditIssueComment(ctx, testToken(), "o", "r", 77, "x"); !IsClass(err, ClassServer) || len(reqs) != DefaultAttempts {
		t.Fatalf("edit after 502: %v, %d requests", err, len(reqs))
	}
	for _, body := range []string{"", strings.Repeat("x", MaxCommentBodyBytes+1)} {
		if _, err := c.CreateIssueComment(ctx, testToken(), "o", "r", 5, body); !IsClass(err, ClassMalformed) {
			t.Fatalf("body of %d bytes: %v", len(body), err)
		}
	}
}

func TestBranchHead(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	var path string
	ref := "refs/heads/release/v1"
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.EscapedPath()
		writeJSON(w, 200, map[string]any{"ref": ref, "object": map[string]any{"sha": sha, "type": "commit"}})
	})
	ctx := context.Background()
	got, err := c.BranchHead(ctx, testToken(), "o", "r", "release/v1")
	if err != nil || got != sha || path != "/repos/o/r/git/ref/heads/release/v1" {
		t.Fatalf("%s %v %s", got, err, path)
	}
	// GitHub answers a prefix match with the list or another ref: refused.
	ref = "refs/heads/release/v1-old"
	if _, err := c.BranchHead(ctx, testToken(), "o", "r", "release/v1"); !IsClass(err, ClassMalformed) {
		t.Fatalf("another ref: %v", err)
	}
	if _, err := c.BranchHead(ctx, testToken(), "o", "r", "refs/heads/x"); !IsClass(err, ClassMalformed) {
		t.Fatalf("unsafe branch: %v", err)
	}
}

package github

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

const runSHA = "89abcdef0123456789abcdef0123456789abcdef"

func TestListRunsConditionalAndUnauthenticated(t *testing.T) {
	var seen []http.Header
	c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Clone())
		if r.URL.Path != "/repos/octo/hello/actions/runs" || r.URL.Query().Get("head_sha") != runSHA || r.URL.Query().Get("per_page") != "100" {
			t.Errorf("request %s", r.URL)
		}
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "58")
		w.Header().Set("X-RateLimit-Reset", "1700003600")
		if r.Header.Get("If-None-Match") == `W/"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `W/"v1"`)
		writeJSON(w, 200, map[string]any{"total_count": 2, "workflow_runs": []map[string]any{
			{"id": 1, "head_sha": runSHA, "status": "completed", "conclusion": "success", "event": "pull_request"},
			{"id": 2, "head_sha": runSHA, "status": "in_progress", "conclusion": nil},
		}})
	})
	_ = clk
	p, err := c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.NotModified || p.ETag != `W/"v1"` || p.TotalCount != 2 || len(p.Runs) != 2 || p.Runs[0].Conclusion != "success" ||
		p.Runs[1].Conclusion != "" || p.Rate != (RateLimit{Limit: 60, Remaining: 58, Reset: time.Unix(1700003600, 0)}) {
		t.Fatalf("page %+v", p)
	}
	p, err = c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, p.ETag)
	if err != nil || !p.NotModified || p.ETag != `W/"v1"` || p.Rate.Remaining != 58 {
		t.Fatalf("conditional: %+v %v", p, err)
	}
	for _, h := range seen {
		if h.Get("Authorization") != "" {
			t.Fatal("the runs list carried a credential")
		}
	}
	if seen[0].Get("If-None-Match") != "" || seen[1].Get("If-None-Match") != `W/"v1"` {
		t.Fatalf("If-None-Match %q then %q", seen[0].Get("If-None-Match"), seen[1].Get("If-None-Match"))
	}
}

func TestListRunsRateLimitIsNotWaited(t *testing.T) {
	c, clk := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "1700000600")
		writeJSON(w, 403, map[string]string{"message": "API rate limit exceeded for 127.0.0.1."})
	})
	_, err := c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, "")
	var e *APIError
	if !errorsAs(err, &e) || e.Class != ClassRateLimited || e.RetryAfter < 10*time.Minute || e.RetryAfter > 11*time.Minute {
		t.Fatalf("%v (retry after %v)", err, e.RetryAfter)
	}
	if len(clk.sleeps) != 0 || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("slept %v; error %q", clk.sleeps, err)
	}
}

func TestListRunsRefusesMalformed(t *testing.T) {
	for name, body := range map[string]any{
		"bad sha":       map[string]any{"total_count": 1, "workflow_runs": []map[string]any{{"id": 1, "head_sha": "x", "status": "queued"}}},
		"no status":     map[string]any{"total_count": 1, "workflow_runs": []map[string]any{{"id": 1, "head_sha": runSHA}}},
		"count too low": map[string]any{"total_count": 0, "workflow_runs": []map[string]any{{"id": 1, "head_sha": runSHA, "status": "queued"}}},
		"not json":      "[",
	} {
		c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, body) })
		if _, err := c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, ""); !IsClass(err, ClassMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) { t.Error("request sent") })
	if _, err := c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, "a\nb"); !IsClass(err, ClassMalformed) {
		t.Fatalf("etag with a newline: %v", err)
	}
}

func TestMergeExactHead(t *testing.T) {
	var body string
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/repos/octo/hello/pulls/7/merge":
			b := make([]byte, 512)
			n, _ := r.Body.Read(b)
			body = string(b[:n])
			writeJSON(w, 200, map[string]any{"sha": runSHA, "merged": true, "message": "Pull Request successfully merged"})
		case r.Method == http.MethodPut && r.URL.Path == "/repos/octo/hello/pulls/8/merge":
			writeJSON(w, 409, map[string]any{"message": "Head branch was modified. Review and try the merge again."})
		case r.Method == http.MethodPut && r.URL.Path == "/repos/octo/hello/pulls/9/merge":
			writeJSON(w, 405, map[string]any{"message": "Pull Request is not mergeable"})
		case r.Method == http.MethodGet && r.URL.Path == "/repos/octo/hello/pulls/7/merge":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodGet && r.URL.Path == "/repos/octo/hello/pulls/8/merge":
			writeJSON(w, 404, map[string]any{"message": "Not Found"})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
	})
	sha, err := c.Merge(context.Background(), testToken(), "octo", "hello", 7, runSHA)
	if err != nil || sha != runSHA || !strings.Contains(body, `"sha":"`+runSHA+`"`) || !strings.Contains(body, `"merge_method":"merge"`) {
		t.Fatalf("merge: %q %v body %s", sha, err, body)
	}
	var e *APIError
	if _, err := c.Merge(context.Background(), testToken(), "octo", "hello", 8, runSHA); !errorsAs(err, &e) || e.Class != ClassConflict {
		t.Fatalf("409: %v", err)
	}
	if _, err := c.Merge(context.Background(), testToken(), "octo", "hello", 9, runSHA); !errorsAs(err, &e) || e.Status != 405 {
		t.Fatalf("405: %v", err)
	}
	if ok, err := c.Merged(context.Background(), testToken(), "octo", "hello", 7); err != nil || !ok {
		t.Fatalf("merged 204: %v %v", ok, err)
	}
	if ok, err := c.Merged(context.Background(), testToken(), "octo", "hello", 8); err != nil || ok {
		t.Fatalf("merged 404: %v %v", ok, err)
	}
}

package github

import (
	"context"
	"net/http"
	"strconv"
	"testing"
)

// More runs than one page holds: every page is read (GitHub pages by
// per_page, at most 100), and the answer carries no ETag, since a 304 of
// the first page says nothing about the others.
func TestListRunsReadsEveryPage(t *testing.T) {
	const total = 130
	pages := 0
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		pages++
		q := r.URL.Query()
		per, _ := strconv.Atoi(q.Get("per_page"))
		if per <= 0 || per > 100 {
			per = 30
		}
		page, _ := strconv.Atoi(q.Get("page"))
		if page < 1 {
			page = 1
		}
		var runs []map[string]any
		for i := (page - 1) * per; i < page*per && i < total; i++ {
			conclusion := "success"
			if i == total-1 {
				conclusion = "failure"
			}
			runs = append(runs, map[string]any{"id": i + 1, "head_sha": runSHA, "status": "completed", "conclusion": conclusion})
		}
		if runs == nil {
			runs = []map[string]any{}
		}
		w.Header().Set("ETag", `W/"p`+strconv.Itoa(page)+`"`)
		writeJSON(w, 200, map[string]any{"total_count": total, "workflow_runs": runs})
	})
	p, err := c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalCount != total || len(p.Runs) != total || p.Runs[total-1].Conclusion != "failure" || p.ETag != "" || pages != 2 {
		t.Fatalf("total %d, %d runs, etag %q, %d requests", p.TotalCount, len(p.Runs), p.ETag, pages)
	}
}

// A run that moved to the next page between two reads (a newer run
// arrived) is counted once.
func TestListRunsCountsARunOnce(t *testing.T) {
	c, _ := newTestClient(func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		var runs []map[string]any
		first := 1
		if page == 2 {
			first = 100 // run 100 shifted down by one new run
		}
		for i := first; i < first+100 && i <= 101; i++ {
			runs = append(runs, map[string]any{"id": i, "head_sha": runSHA, "status": "completed", "conclusion": "success"})
		}
		writeJSON(w, 200, map[string]any{"total_count": 101, "workflow_runs": runs})
	})
	p, err := c.ListRuns(context.Background(), nil, "octo", "hello", runSHA, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 101 || p.TotalCount != 101 {
		t.Fatalf("%d runs, total %d", len(p.Runs), p.TotalCount)
	}
}

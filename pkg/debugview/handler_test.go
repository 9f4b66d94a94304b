package debugview

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

const ownerToken = "owner-SECRET-TOKEN"

func fixedNow() time.Time { return time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC) }

func ownerOnly(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+ownerToken }

type fixture struct {
	store *fakeStore
	h     http.Handler
}

func newFixture(t *testing.T, jobs, lanes int) *fixture {
	t.Helper()
	s := newFakeStore(jobs, lanes)
	return &fixture{store: s, h: New(s, ownerOnly, fixedNow)}
}

func (f *fixture) do(t *testing.T, method, target string, auth bool) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer "+ownerToken)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	for _, s := range append([]string{ownerToken}, plantedSecrets...) {
		if strings.Contains(rec.Body.String(), s) {
			t.Fatalf("%s %s: response contains a planted secret", method, target)
		}
		for name, vals := range rec.Header() {
			for _, v := range vals {
				if strings.Contains(v, s) {
					t.Fatalf("header %s contains a planted secret", name)
				}
			}
		}
	}
	return rec
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
	return v
}

func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body.String())
	}
	body := decode[errorBody](t, rec)
	if body.Error.Code != code || body.Error.Message == "" {
		t.Fatalf("error body %+v, want code %s", body, code)
	}
}

func TestShellIsStaticAndLockedDown(t *testing.T) {
	f := newFixture(t, 1, 1)
	wantHeaders := map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
	}
	files := map[string]string{
		"/debug/":        "text/html; charset=utf-8",
		"/debug/app.js":  "text/javascript; charset=utf-8",
		"/debug/app.css": "text/css; charset=utf-8",
	}
	bodies := map[string]string{}
	for path, ctype := range files {
		rec := f.do(t, http.MethodGet, path, false) // no token needed
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != ctype {
			t.Fatalf("%s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		for k, v := range wantHeaders {
			if got := rec.Header().Get(k); got != v {
				t.Fatalf("%s: %s = %q, want %q", path, k, got, v)
			}
		}
		bodies[path] = rec.Body.String()
	}
	html := bodies["/debug/"]
	if regexp.MustCompile(`(?i)<script(\s+[^>]*)?>\s*[^<\s]`).MatchString(html) ||
		regexp.MustCompile(`(?i)\son[a-z]+\s*=|\sstyle\s*=|<style|javascript:|https?://`).MatchString(html) {
		t.Fatal("shell has inline code, inline style or an external origin")
	}
	if !strings.Contains(html, `<script src="app.js" defer></script>`) || !strings.Contains(html, `type="password"`) {
		t.Fatal("shell does not load app.js or lacks the password field")
	}
	if regexp.MustCompile(`<input[^>]*\sname=`).MatchString(html) {
		t.Fatal("a named input would be submitted with a form")
	}
	if !strings.Contains(html, `id="live"`) {
		t.Fatal("live activity section missing")
	}
	js := bodies["/debug/app.js"]
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
		"localStorage", "sessionStorage", "indexedDB", "document.cookie", "location.hash", "history.", "http://", "https://"} {
		if strings.Contains(js, banned) {
			t.Fatalf("app.js uses %s", banned)
		}
	}
	if !strings.Contains(js, "'Authorization': 'Bearer ' + token") || !strings.Contains(js, "field.value = ''") {
		t.Fatal("app.js does not send the bearer header or clear the field")
	}
	if f.store.callCount() != 0 {
		t.Fatal("the shell read state")
	}

	if rec := f.do(t, http.MethodGet, "/debug", false); rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/debug/" {
		t.Fatalf("/debug: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	wantError(t, f.do(t, http.MethodGet, "/debug/other.js", false), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodPost, "/debug/", false), http.StatusMethodNotAllowed, "method_not_allowed")
	if rec := f.do(t, http.MethodHead, "/debug/", false); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("HEAD: %d", rec.Code)
	}
}

func apiRoutes() []string {
	return []string{"/v1/debug/jobs", "/v1/debug/workers", "/v1/debug/jobs/j_0001"}
}

func TestAPIRequiresOwner(t *testing.T) {
	f := newFixture(t, 3, 2)
	for _, route := range apiRoutes() {
		rec := f.do(t, http.MethodGet, route, false)
		wantError(t, rec, http.StatusUnauthorized, "unauthorized")
		if rec.Header().Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
		// A wrong token (e.g. a Worker token) is refused the same way.
		req := httptest.NewRequest(http.MethodGet, route, nil)
		req.Header.Set("Authorization", "Bearer worker-token")
		rec = httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		wantError(t, rec, http.StatusUnauthorized, "unauthorized")
		if rec := f.do(t, http.MethodGet, route, true); rec.Code != http.StatusOK {
			t.Fatalf("%s with owner token: %d", route, rec.Code)
		}
	}
	if calls := f.store.callCount(); calls != 4 { // jobs, workers, job+events
		t.Fatalf("store called %d times, want 4 (only for authenticated requests)", calls)
	}
}

func TestAPIIsGetOnly(t *testing.T) {
	f := newFixture(t, 3, 2)
	for _, route := range apiRoutes() {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions} {
			rec := f.do(t, m, route, true)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET" {
				t.Fatalf("%s %s: %d", m, route, rec.Code)
			}
		}
	}
	if f.store.callCount() != 0 {
		t.Fatal("a non-GET request reached the store")
	}
}

func TestJobsPagination(t *testing.T) {
	f := newFixture(t, 60, 0)
	var ids []string
	cursor, pages := "", 0
	for {
		target := "/v1/debug/jobs"
		if cursor != "" {
			target += "?cursor=" + url.QueryEscape(cursor)
		}
		rec := f.do(t, http.MethodGet, target, true)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("page %d: %d %s", pages, rec.Code, rec.Body.String())
		}
		page := decode[jobsPage](t, rec)
		if page.AsOf != "2026-11-29T20:00:00.000000Z" {
			t.Fatalf("as_of %q", page.AsOf)
		}
		pages++
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			if len(page.Jobs) != 10 {
				t.Fatalf("last page has %d jobs", len(page.Jobs))
			}
			break
		}
		if len(page.Jobs) != defaultLimit {
			t.Fatalf("page %d has %d jobs, want the default 25", pages, len(page.Jobs))
		}
		cursor = page.NextCursor
	}
	if pages != 3 || len(ids) != 60 {
		t.Fatalf("%d pages, %d jobs", pages, len(ids))
	}
	if !sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] > ids[j] }) || ids[0] != "j_0059" || ids[59] != "j_0000" {
		t.Fatalf("jobs not newest first without gaps: %v", ids)
	}

	rec := f.do(t, http.MethodGet, "/v1/debug/jobs?limit=100", true)
	if page := decode[jobsPage](t, rec); len(page.Jobs) != 60 || page.NextCursor != "" {
		t.Fatalf("limit=100 gave %d jobs", len(page.Jobs))
	}
	rec = f.do(t, http.MethodGet, "/v1/debug/jobs?limit=7", true)
	if page := decode[jobsPage](t, rec); len(page.Jobs) != 7 || page.NextCursor == "" {
		t.Fatalf("limit=7 gave %d jobs", len(page.Jobs))
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=-1", "limit=abc", "limit=1.5", "limit=", "limit=1&limit=2",
		"cursor=", "offset=3", "input=x", "%zz", "cursor=a&cursor=b"} {
		wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs?"+q, true), http.StatusBadRequest, "invalid_query")
	}
}

func TestLanesAndTimelinePagination(t *testing.T) {
	f := newFixture(t, 2, 30)
	rec := f.do(t, http.MethodGet, "/v1/debug/workers?limit=20", true)
	page := decode[lanesPage](t, rec)
	if len(page.Lanes) != 20 || page.NextCursor == "" || page.Lanes[0].Lane != "worker-00" || !page.Lanes[0].Connected || page.Lanes[1].Connected {
		t.Fatalf("first lanes page %+v", page.Lanes[:2])
	}
	if page.Lanes[1].DisconnectedAt == "" || page.Lanes[0].ConnectedAt != "2026-11-29T19:20:17.123456Z" {
		t.Fatalf("connection state %+v", page.Lanes[:2])
	}
	rec = f.do(t, http.MethodGet, "/v1/debug/workers?limit=20&cursor="+url.QueryEscape(page.NextCursor), true)
	page2 := decode[lanesPage](t, rec)
	if len(page2.Lanes) != 10 || page2.NextCursor != "" || page2.Lanes[0].Lane != "worker-20" {
		t.Fatalf("second lanes page: %d lanes", len(page2.Lanes))
	}

	rec = f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001", true)
	tl := decode[timelinePage](t, rec)
	if tl.Job.ID != "j_0001" || len(tl.Attempts) != 2 || len(tl.Events) != 25 || tl.NextCursor == "" || tl.Events[0].Seq != 1 {
		t.Fatalf("timeline: job %s, %d attempts, %d events", tl.Job.ID, len(tl.Attempts), len(tl.Events))
	}
	if tl.Attempts[1].WorkerID != "worker-1#1" || tl.Attempts[1].Ordinal != 2 || tl.Attempts[0].DeadlineAt == "" {
		t.Fatalf("attempt %+v", tl.Attempts[1])
	}
	rec = f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001?cursor="+url.QueryEscape(tl.NextCursor), true)
	tl2 := decode[timelinePage](t, rec)
	if len(tl2.Events) != 5 || tl2.Events[0].Seq != 26 || tl2.NextCursor != "" {
		t.Fatalf("second timeline page: %d events", len(tl2.Events))
	}

	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_9999", true), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/..%2Fetc", true), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/"+strings.Repeat("a", 129), true), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0001/events", true), http.StatusNotFound, "not_found")
	wantError(t, f.do(t, http.MethodGet, "/v1/debug/other", true), http.StatusNotFound, "not_found")
}

func TestCursorTampering(t *testing.T) {
	f := newFixture(t, 40, 40)
	get := func(target string) *httptest.ResponseRecorder { return f.do(t, http.MethodGet, target, true) }
	jobsCursor := decode[jobsPage](t, get("/v1/debug/jobs?limit=5")).NextCursor
	lanesCursor := decode[lanesPage](t, get("/v1/debug/workers?limit=5")).NextCursor
	eventsCursor := decode[timelinePage](t, get("/v1/debug/jobs/j_0001?limit=5")).NextCursor
	if jobsCursor == "" || lanesCursor == "" || eventsCursor == "" {
		t.Fatal("no cursors issued")
	}
	if rec := get("/v1/debug/jobs?limit=5&cursor=" + url.QueryEscape(jobsCursor)); rec.Code != http.StatusOK {
		t.Fatalf("valid cursor refused: %d", rec.Code)
	}

	var bad []string
	// Every single-character change of the cursor is detected.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
	for i := range jobsCursor {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, jobsCursor[i])+1)%len(alphabet)], alphabet[(strings.IndexByte(alphabet, jobsCursor[i])+17)%len(alphabet)]} {
			mutated := jobsCursor[:i] + string(c) + jobsCursor[i+1:]
			if mutated != jobsCursor {
				bad = append(bad, mutated)
			}
		}
	}
	payload, mac, _ := strings.Cut(jobsCursor, ".")
	_, otherMAC, _ := strings.Cut(lanesCursor, ".")
	bad = append(bad,
		jobsCursor[:len(jobsCursor)-1], jobsCursor+"A", payload, "."+mac, payload+"."+otherMAC,
		"AAAA."+mac, "not-a-cursor", strings.Repeat("A", maxCursorLen+1), lanesCursor, eventsCursor)
	for _, c := range bad {
		wantError(t, get("/v1/debug/jobs?cursor="+url.QueryEscape(c)), http.StatusBadRequest, "invalid_cursor")
	}
	// Cursors are bound to their listing and, for timelines, to the job.
	wantError(t, get("/v1/debug/workers?cursor="+url.QueryEscape(jobsCursor)), http.StatusBadRequest, "invalid_cursor")
	wantError(t, get("/v1/debug/jobs/j_0002?cursor="+url.QueryEscape(eventsCursor)), http.StatusBadRequest, "invalid_cursor")
	wantError(t, get("/v1/debug/jobs/j_0001?cursor="+url.QueryEscape(lanesCursor)), http.StatusBadRequest, "invalid_cursor")
	// Another process (a restarted Gate) has another key.
	other := newFixture(t, 40, 40)
	wantError(t, other.do(t, http.MethodGet, "/v1/debug/jobs?cursor="+url.QueryEscape(jobsCursor), true), http.StatusBadRequest, "invalid_cursor")
}

// The JSON field sets are pinned: adding a field to a record is a decision
// this test makes visible.
func TestFieldAllowlists(t *testing.T) {
	want := map[reflect.Type][]string{
		reflect.TypeOf(jobView{}): {"attempt_count", "base_sha", "ci_state", "created_at", "delivery_branch", "delivery_phase",
			"failure_code", "id", "kind", "merge_sha", "pr_url", "repository_id", "retry_at", "status", "updated_at"},
		reflect.TypeOf(attemptView{}): {"completed_at", "deadline_at", "disposition", "failure_code", "id",
			"leased_at", "ordinal", "status", "usage", "worker_id"},
		reflect.TypeOf(usageView{}):    {"cached_tokens", "input_tokens", "output_tokens", "requests"},
		reflect.TypeOf(eventView{}):    {"at", "attempt", "code", "seq", "type"},
		reflect.TypeOf(laneView{}):     {"attempt_id", "connected", "connected_at", "disconnected_at", "job_id", "lane", "pool", "worker_id"},
		reflect.TypeOf(jobsPage{}):     {"as_of", "jobs", "next_cursor"},
		reflect.TypeOf(lanesPage{}):    {"as_of", "lanes", "next_cursor"},
		reflect.TypeOf(timelinePage{}): {"as_of", "attempts", "events", "job", "next_cursor"},
	}
	for typ, fields := range want {
		var got []string
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			got = append(got, name)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, fields) {
			t.Errorf("%s fields %v, want %v", typ.Name(), got, fields)
		}
	}
	// The Reader records cannot carry content either.
	readerFields := map[reflect.Type]int{reflect.TypeOf(Job{}): 15, reflect.TypeOf(Attempt{}): 10, reflect.TypeOf(Usage{}): 4, reflect.TypeOf(Event{}): 5, reflect.TypeOf(Lane{}): 8}
	for typ, n := range readerFields {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, want %d: review the allowlist", typ.Name(), typ.NumField(), n)
		}
	}
}

// Free text smuggled into code, SHA or identifier fields by the backing
// data is dropped, not rendered.
func TestFieldSanitizing(t *testing.T) {
	f := newFixture(t, 1, 1)
	row := f.store.rows["j_0000"]
	row.job.FailureCode = "boom: " + plantedSecrets[6]
	row.job.RepositoryID = plantedSecrets[2] + " x"
	row.job.Status = "Failed Badly"
	row.attempts[0].Disposition = plantedSecrets[4]
	row.events[0].Code = plantedSecrets[6]
	f.store.lanes[0].Pool = plantedSecrets[5]
	rec := f.do(t, http.MethodGet, "/v1/debug/jobs/j_0000?limit=1", true)
	tl := decode[timelinePage](t, rec)
	if tl.Job.FailureCode != "" || tl.Job.RepositoryID != "" || tl.Job.Status != "" || tl.Attempts[0].Disposition != "" || tl.Events[0].Code != "" {
		t.Fatalf("unsanitized fields: %+v", tl)
	}
	if tl.Job.BaseSHA != "0123456789abcdef0123456789abcdef01234567" || tl.Job.CreatedAt != "2026-11-29T19:20:17.123456Z" {
		t.Fatalf("exact SHA or microsecond UTC time lost: %+v", tl.Job)
	}
	rec = f.do(t, http.MethodGet, "/v1/debug/workers", true)
	if l := decode[lanesPage](t, rec); l.Lanes[0].Pool != "" {
		t.Fatal("lane pool not sanitized")
	}
	f.do(t, http.MethodGet, "/v1/debug/jobs", true) // planted secrets checked by do

	// Delivery fields: a URL with credentials or any free text is dropped.
	row.job.DeliveryPhase, row.job.DeliveryBranch, row.job.CIState = "ci", "forge/job-j_0000", "pending"
	row.job.PRURL = "https://x-access-token:" + plantedSecrets[0] + "@github.com/o/r/pull/1"
	row.job.MergeSHA = "not a sha"
	tl = decode[timelinePage](t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0000?limit=1", true))
	if tl.Job.PRURL != "" || tl.Job.MergeSHA != "" || tl.Job.DeliveryPhase != "ci" || tl.Job.DeliveryBranch != "forge/job-j_0000" || tl.Job.CIState != "pending" {
		t.Fatalf("delivery fields: %+v", tl.Job)
	}
	row.job.PRURL = "https://github.com/o/r/pull/1"
	if tl = decode[timelinePage](t, f.do(t, http.MethodGet, "/v1/debug/jobs/j_0000?limit=1", true)); tl.Job.PRURL != row.job.PRURL {
		t.Fatalf("pull request URL dropped: %+v", tl.Job)
	}
}

func TestStoreErrorsAreOpaque(t *testing.T) {
	f := newFixture(t, 1, 1)
	f.store.fail = errDiskOnFire
	for _, route := range apiRoutes() {
		rec := f.do(t, http.MethodGet, route, true)
		wantError(t, rec, http.StatusServiceUnavailable, "unavailable")
		if strings.Contains(rec.Body.String(), "sqlite") || strings.Contains(rec.Body.String(), "/srv") {
			t.Fatal("internal error text leaked")
		}
	}
}

func TestEmptyListsAreArrays(t *testing.T) {
	f := newFixture(t, 0, 0)
	for _, route := range []string{"/v1/debug/jobs", "/v1/debug/workers"} {
		body, _ := io.ReadAll(f.do(t, http.MethodGet, route, true).Body)
		if !strings.Contains(string(body), "[]") || strings.Contains(string(body), "null") {
			t.Fatalf("%s: %s", route, body)
		}
	}
}

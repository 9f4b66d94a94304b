package acceptance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// marker is a task value that must never be echoed back or logged.
const marker = "ZZMARKERq7x"

// assertAPIError checks the documented error shape, status and code, and
// that the body echoes none of the forbidden strings.
func assertAPIError(t testing.TB, r httpResult, status int, code string, forbidden ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if !bytes.HasSuffix(r.body, []byte("\n")) || bytes.Count(r.body, []byte("\n")) != 1 {
		t.Errorf("error body is not one line ending in LF: %q", r.body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &top); err != nil || len(top) != 1 || top["error"] == nil {
		t.Fatalf("error body shape: %s", r.body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &inner); err != nil || len(inner) != 2 {
		t.Fatalf("error object shape: %s", r.body)
	}
	var gotCode, msg string
	if json.Unmarshal(inner["code"], &gotCode) != nil || json.Unmarshal(inner["message"], &msg) != nil || msg == "" {
		t.Fatalf("error fields: %s", r.body)
	}
	if gotCode != code {
		t.Errorf("code %q, want %q (body %s)", gotCode, code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	for _, f := range forbidden {
		if f != "" && bytes.Contains(r.body, []byte(f)) {
			t.Errorf("error body echoes %q: %s", f, r.body)
		}
	}
}

// jobCount counts the jobs the owner can see through the debug list route.
func (g *gate) jobCount(t testing.TB) int {
	t.Helper()
	r := g.do(t, "GET", "/v1/debug/jobs?limit=100", nil, g.bearer())
	if r.status != http.StatusOK {
		t.Fatalf("debug jobs: %d %s", r.status, r.body)
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("debug jobs: %s", r.body)
	}
	var jobs []json.RawMessage
	if err := json.Unmarshal(v["jobs"], &jobs); err != nil {
		t.Fatalf("debug jobs list: %s", r.body)
	}
	return len(jobs)
}

func TestOwnerAPIHostileBodies(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		name, body, code string
	}{
		{"empty", "", "invalid_json"},
		{"null", "null", "invalid_json"},
		{"array", "[]", "invalid_json"},
		{"string", `"` + marker + `"`, "invalid_json"},
		{"duplicate key", `{"input":"a` + marker + `","input":"b"}`, "invalid_json"},
		{"case variant key", `{"Input":"` + marker + `"}`, "invalid_json"},
		{"unknown key", `{"input":"` + marker + `","zz":1}`, "invalid_json"},
		{"null value", `{"input":null}`, "invalid_json"},
		{"wrong type", `{"input":12345}`, "invalid_json"},
		{"trailing object", `{"input":"` + marker + `"}{}`, "invalid_json"},
		{"trailing garbage", `{"input":"` + marker + `"} x`, "invalid_json"},
		{"invalid utf8", "{\"input\":\"" + marker + "\xff\xfe\"}", "invalid_json"},
		{"invalid utf8 in key", "{\"inp\xffut\":\"" + marker + "\"}", "invalid_json"},
		{"huge number", `{"input":1e999999}`, "invalid_json"},
		{"deep nesting", `{"input":` + deep + `}`, "invalid_json"},
		{"unterminated", `{"input":"` + marker, "invalid_json"},
		{"empty input", `{"input":""}`, "invalid_task"},
		{"input too long", `{"input":"` + marker + strings.Repeat("a", 65537-len(marker)) + `"}`, "invalid_task"},
		{"text plus coding field", `{"input":"` + marker + `","repository_id":"x"}`, "invalid_task"},
		{"unknown repository", `{"repository_id":"nope","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"` + marker + `"}`, "invalid_task"},
		{"bad base sha", `{"repository_id":"nope","base_sha":"` + marker + `","instruction":"x"}`, "invalid_task"},
		{"half author", `{"repository_id":"nope","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"x","commit_author_name":"` + marker + `"}`, "invalid_task"},
	}
	before := g.jobCount(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := g.do(t, "POST", "/v1/jobs", strings.NewReader(c.body), g.bearer())
			assertAPIError(t, r, http.StatusBadRequest, c.code, marker)
		})
	}
	// Lone surrogate escapes are not valid Unicode text: rejected (either
	// code), never stored as a replacement character.
	for _, body := range []string{`{"input":"\ud800"}`, `{"input":"a\udfffb"}`, `{"input":"\ud800\u0041"}`} {
		r := g.do(t, "POST", "/v1/jobs", strings.NewReader(body), g.bearer())
		if r.status != http.StatusBadRequest {
			t.Errorf("lone surrogate %s: status %d %s", body, r.status, r.body)
		}
	}
	if after := g.jobCount(t); after != before {
		t.Fatalf("rejected submissions stored jobs: %d -> %d", before, after)
	}
	// The exact limits are accepted.
	id := g.submit(t, `{"input":"`+strings.Repeat("b", 65536)+`"}`)
	if j := g.job(t, id); j.Status != "pending" || j.Kind != "text" || j.AttemptCount != 0 {
		t.Fatalf("job at the input limit: %+v", j)
	}
	g.assertNoSecrets(t, marker)
}

func TestOwnerAPIOversizedBody(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	before := g.jobCount(t)
	big := `{"input":"` + strings.Repeat("a", 1<<20) + `"}`
	// With a Content-Length and chunked (unknown length).
	r := g.do(t, "POST", "/v1/jobs", strings.NewReader(big), g.bearer())
	assertAPIError(t, r, http.StatusRequestEntityTooLarge, "too_large")
	r = g.do(t, "POST", "/v1/jobs", struct{ *strings.Reader }{strings.NewReader(big)}, g.bearer())
	assertAPIError(t, r, http.StatusRequestEntityTooLarge, "too_large")
	// Exactly 1 MiB of valid JSON is not too large (it is an invalid task:
	// the input is over 64 KiB).
	exact := `{"input":"` + strings.Repeat("a", 1<<20-len(`{"input":""}`)) + `"}`
	r = g.do(t, "POST", "/v1/jobs", strings.NewReader(exact), g.bearer())
	assertAPIError(t, r, http.StatusBadRequest, "invalid_task")
	if after := g.jobCount(t); after != before {
		t.Fatalf("oversized submissions stored jobs: %d -> %d", before, after)
	}
	// The Gate is still serving.
	if r := g.do(t, "GET", "/readyz", nil); r.status != http.StatusOK {
		t.Fatalf("readyz after oversized bodies: %d", r.status)
	}
}

func TestOwnerAPIAuthorization(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	id := g.submit(t, `{"input":"hello"}`)
	wtok := g.workers[0].token
	variants := map[string][]string{
		"missing":          nil,
		"empty":            {""},
		"scheme only":      {"Bearer"},
		"scheme and space": {"Bearer "},
		"basic":            {"Basic " + g.owner},
		"no scheme":        {g.owner},
		"worker token":     {"Bearer " + wtok},
		"wrong token":      {"Bearer " + g.owner + "x"},
		"prefix token":     {"Bearer " + g.owner[:len(g.owner)-1]},
		"double space":     {"Bearer  " + g.owner},
		"duplicate header": {"Bearer " + g.owner, "Bearer " + g.owner},
		"owner then wrong": {"Bearer " + g.owner, "Bearer nope"},
		"long":             {"Bearer " + strings.Repeat("a", 5000)},
	}
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"input":"` + marker + `"}`},
		{"GET", "/v1/jobs/" + id, ""},
		{"GET", "/v1/jobs/" + id + "/events", ""},
		{"GET", "/v1/jobs/" + id + "/aggregate", ""},
		{"GET", "/v1/debug/jobs", ""},
		{"GET", "/v1/debug/workers", ""},
		{"GET", "/v1/debug/jobs/" + id, ""},
		{"GET", "/v1/debug/jobs/" + id + "/activity", ""},
		{"DELETE", "/v1/jobs/" + id, ""}, // wrong method: authentication first
	}
	before := g.jobCount(t)
	for name, auth := range variants {
		for _, rt := range routes {
			r := g.do(t, rt.method, rt.path, strings.NewReader(rt.body), auth...)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: status %d %s", rt.method, rt.path, name, r.status, r.body)
				continue
			}
			if strings.HasPrefix(rt.path, "/v1/debug") {
				continue // the debug viewer's own error shape
			}
			assertAPIError(t, r, http.StatusUnauthorized, "unauthorized", g.owner, wtok, id)
		}
	}
	if after := g.jobCount(t); after != before {
		t.Fatalf("unauthorized submissions stored jobs: %d -> %d", before, after)
	}
	g.assertNoSecrets(t, marker)
}

func TestOwnerAPIMethodsAndPaths(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	id := g.submit(t, `{"input":"hello"}`)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/jobs"},
		{"PUT", "/v1/jobs"},
		{"DELETE", "/v1/jobs"},
		{"POST", "/v1/jobs/" + id},
		{"DELETE", "/v1/jobs/" + id},
		{"PATCH", "/v1/jobs/" + id + "/events"},
		{"POST", "/v1/jobs/" + id + "/aggregate"},
	} {
		r := g.do(t, c.method, c.path, nil, g.bearer())
		assertAPIError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	}
	for _, p := range []string{
		"/v1/jobs/" + strings.Repeat("a", 32),
		"/v1/jobs/" + strings.Repeat("a", 65),
		"/v1/jobs/%2e%2e",
		"/v1/jobs/..%2f..%2fetc%2fpasswd",
		"/v1/jobs/a%00b",
		"/v1/jobs/%E2%80%AE",
		"/v1/jobs/" + id + "%20",
		"/v1/jobs/" + strings.ToUpper(id),
		"/v1/jobs/" + id + "/evidence",
		"/v1/jobs/" + id + "/aggregate/x",
		"/v1/nope",
		"/",
	} {
		r := g.do(t, "GET", p, nil, g.bearer())
		assertAPIError(t, r, http.StatusNotFound, "not_found")
	}
	if r := g.do(t, "GET", "/readyz", nil); r.status != http.StatusOK || string(r.body) != "{\"status\":\"ready\"}\n" {
		t.Fatalf("readyz: %d %q", r.status, r.body)
	}
	// Responses never carry a token.
	r := g.do(t, "GET", "/v1/jobs/"+id+"/aggregate", nil, g.bearer())
	if bytes.Contains(r.body, []byte(g.owner)) {
		t.Fatal("aggregate contains the owner token")
	}
	for k, vs := range r.header {
		for _, v := range vs {
			if strings.Contains(v, g.owner) {
				t.Fatalf("header %s carries the owner token", k)
			}
		}
	}
	g.assertNoSecrets(t)
}

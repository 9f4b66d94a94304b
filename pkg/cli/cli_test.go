package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
)

const testToken = "owner-token-4f1c9a-SECRET"

type result struct {
	code           int
	stdout, stderr string
}

// runForge runs one invocation in-process with the given environment.
func runForge(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return checkResult(t, args, runForgeRaw(env, stdin, args...))
}

// runForgeRaw runs one invocation without touching t, so it may run on
// another goroutine; pass its result to checkResult afterwards.
func runForgeRaw(env map[string]string, stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	err := Run(context.Background(), args, strings.NewReader(stdin), &out, &errOut, lookup)
	return result{ExitCode(err), out.String(), errOut.String()}
}

// checkResult applies the checks every invocation must pass.
func checkResult(t *testing.T, args []string, r result) result {
	t.Helper()
	for _, s := range []string{r.stdout, r.stderr} {
		if strings.Contains(s, testToken) {
			t.Fatalf("token leaked into output of %v", args)
		}
	}
	if r.code != ExitOK && !strings.HasPrefix(r.stderr, "forge: error: ") && r.code != ExitUsage {
		t.Fatalf("exit %d without a forge: error: line: %q", r.code, r.stderr)
	}
	return r
}

func gateEnv(g *fakeGate) map[string]string {
	return map[string]string{"FORGE_GATE_URL": g.srv.URL, "FORGE_OWNER_TOKEN": testToken}
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, code, r.stdout, r.stderr)
	}
}

// decodeOut strictly decodes stdout into v (the output contract is the
// documented object, nothing else).
func decodeOut[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not the documented object: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Fatalf("stdout carries more than one value: %q", r.stdout)
	}
	return v
}

// assertTokenOnlyInHeader checks every request the Gate saw.
func assertTokenOnlyInHeader(t *testing.T, g *fakeGate) {
	t.Helper()
	reqs := g.recordedRequests()
	if len(reqs) == 0 {
		t.Fatal("no requests recorded")
	}
	for _, r := range reqs {
		if strings.Contains(r.uri, testToken) || strings.Contains(r.body, testToken) {
			t.Fatalf("token in URL or body of %s", r.method)
		}
		for name, vals := range r.header {
			for _, v := range vals {
				if strings.Contains(v, testToken) && (name != "Authorization" || v != "Bearer "+testToken) {
					t.Fatalf("token in header %s", name)
				}
			}
		}
		if r.header.Get("Authorization") != "Bearer "+testToken {
			t.Fatalf("request without the bearer header")
		}
	}
}

func TestVersion(t *testing.T) {
	r := runForge(t, nil, "", "--version")
	wantCode(t, r, ExitOK)
	if r.stdout != buildinfo.Line("forge")+"\n" {
		t.Fatalf("version line %q", r.stdout)
	}
}

func TestTextJobLifecycle(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)

	r := runForge(t, env, `{"input":"hello agent forge"}`+"\n", "submit", "-file", "-")
	wantCode(t, r, ExitOK)
	job := decodeOut[Job](t, r)
	if job.Kind != "text" || job.Status != "pending" || job.ID == "" {
		t.Fatalf("submitted job %+v", job)
	}
	if !strings.Contains(r.stdout, "\n  \"id\": ") {
		t.Fatalf("output not indented by two spaces: %q", r.stdout)
	}

	r = runForge(t, env, "", "status", job.ID)
	wantCode(t, r, ExitOK)
	if st := decodeOut[Job](t, r); st.Status != "leased" || st.ID != job.ID {
		t.Fatalf("status %+v", st)
	}

	r = runForge(t, env, "", "wait", "-poll", "10ms", job.ID, "-timeout", "1m")
	wantCode(t, r, ExitOK)
	agg := decodeOut[Aggregate](t, r)
	if agg.Job.Status != "succeeded" || agg.Job.Result == nil || *agg.Job.Result != "HELLO AGENT FORGE" {
		t.Fatalf("aggregate job %+v", agg.Job)
	}
	if len(agg.Attempts) != 1 || agg.Attempts[0].WorkerID != "worker-1#1" || agg.Attempts[0].Evidence == nil {
		t.Fatalf("attempts %+v", agg.Attempts)
	}

	r = runForge(t, env, "", "events", job.ID)
	wantCode(t, r, ExitOK)
	events := decodeOut[[]Event](t, r)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if strings.Join(types, ",") != "submitted,leased,succeeded" {
		t.Fatalf("events %v", types)
	}

	r = runForge(t, env, "", "result", job.ID)
	wantCode(t, r, ExitOK)
	if again := decodeOut[Aggregate](t, r); again.Job.Status != "succeeded" || len(again.Events) != 3 {
		t.Fatalf("result %+v", again)
	}
	assertTokenOnlyInHeader(t, g)
}

func TestSubmitWait(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	file := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(file, []byte(`{"input":"hi"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runForge(t, env, "", "submit", "-file", file, "-wait", "-poll", "10ms")
	wantCode(t, r, ExitOK)
	if agg := decodeOut[Aggregate](t, r); agg.Job.Status != "succeeded" || *agg.Job.Result != "HI" {
		t.Fatalf("aggregate %+v", agg.Job)
	}

	r = runForge(t, env, `{"input":"fail"}`, "submit", "-file", "-", "-wait", "-poll", "10ms")
	wantCode(t, r, ExitJobFailed)
	agg := decodeOut[Aggregate](t, r)
	if agg.Job.Status != "failed" || *agg.Job.FailureCode != "invalid_task" {
		t.Fatalf("aggregate %+v", agg.Job)
	}
	if !strings.Contains(r.stderr, "forge: error: job "+agg.Job.ID+" failed: invalid_task") {
		t.Fatalf("stderr %q", r.stderr)
	}
	assertTokenOnlyInHeader(t, g)
}

func TestWaitFailedAndTimeout(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	submit := func(input string) string {
		r := runForge(t, env, `{"input":"`+input+`"}`, "submit", "-file", "-")
		wantCode(t, r, ExitOK)
		return decodeOut[Job](t, r).ID
	}
	failed, forever, flaky, flakyAgg := submit("fail"), submit("forever"), submit("flaky"), submit("flaky-aggregate")

	r := runForge(t, env, "", "wait", "-poll", "10ms", failed)
	wantCode(t, r, ExitJobFailed)
	if decodeOut[Aggregate](t, r).Job.Status != "failed" {
		t.Fatal("failed job not printed")
	}

	r = runForge(t, env, "", "wait", "-timeout", "50ms", "-poll", "10ms", forever)
	wantCode(t, r, ExitTimedOut)
	if r.stdout != "" || !strings.Contains(r.stderr, "timed out waiting for job "+forever) ||
		!strings.Contains(r.stderr, "forge: hint: run `forge wait "+forever+"`") {
		t.Fatalf("timeout output: stdout %q stderr %q", r.stdout, r.stderr)
	}

	// A 503 after the first successful poll is retried.
	r = runForge(t, env, "", "wait", "-poll", "10ms", flaky)
	wantCode(t, r, ExitOK)
	// So is a 503 for the aggregate of a job that just ended.
	r = runForge(t, env, "", "wait", "-poll", "10ms", flakyAgg)
	wantCode(t, r, ExitOK)
	if decodeOut[Aggregate](t, r).Job.Status != "succeeded" {
		t.Fatalf("aggregate not printed: %q", r.stdout)
	}

	// submit -wait that times out names the job so it can be resumed.
	r = runForge(t, env, `{"input":"forever"}`, "submit", "-file", "-", "-wait", "-timeout", "30ms", "-poll", "10ms")
	wantCode(t, r, ExitTimedOut)
	if !strings.Contains(r.stderr, "forge wait j_") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestCodingTaskIsSentCanonically(t *testing.T) {
	g := newFakeGate(t, testToken)
	task := `{ "instruction":"Fix it.", "repository_id":"agent-forge",
	  "base_sha":"0123456789abcdef0123456789abcdef01234567","tests":[["go","test","./..."]],
	  "commit_author_name":"A","commit_author_email":"a@example.com"}`
	r := runForge(t, gateEnv(g), task, "submit", "-file", "-")
	wantCode(t, r, ExitOK)
	job := decodeOut[Job](t, r)
	if job.Kind != "coding" || *job.RepositoryID != "agent-forge" {
		t.Fatalf("job %+v", job)
	}
	reqs := g.recordedRequests()
	want := `{"repository_id":"agent-forge","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"Fix it.","tests":[["go","test","./..."]],"commit_author_name":"A","commit_author_email":"a@example.com"}`
	if len(reqs) != 1 || reqs[0].body != want || reqs[0].header.Get("Content-Type") != "application/json" {
		t.Fatalf("sent %q", reqs[0].body)
	}
}

func TestUsageErrors(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	cases := map[string][]string{
		"no args":            {},
		"unknown subcommand": {"frobnicate"},
		"status without id":  {"status"},
		"two ids":            {"status", "j_1", "j_2"},
		"path id":            {"status", "../admin"},
		"slash id":           {"events", "j/1"},
		"long id":            {"result", strings.Repeat("a", 129)},
		"unknown flag":       {"status", "-verbose", "j_1"},
		"bad duration":       {"wait", "-timeout", "soon", "j_1"},
		"zero timeout":       {"wait", "-timeout", "0s", "j_1"},
		"poll too small":     {"wait", "-poll", "1ms", "j_1"},
		"submit no file":     {"submit"},
		"submit positional":  {"submit", "-file", "-", "extra"},
		"timeout sans wait":  {"submit", "-file", "-", "-timeout", "1s"},
		"bad token env":      {"status", "-token-env", "1BAD-NAME", "j_1"},
		"ftp url":            {"status", "-url", "ftp://127.0.0.1/", "j_1"},
		"userinfo url":       {"status", "-url", "http://user:pw@127.0.0.1/", "j_1"},
		"query url":          {"status", "-url", "http://127.0.0.1/?a=b", "j_1"},
		"version extra":      {"--version", "x"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			r := runForge(t, env, "", args...)
			wantCode(t, r, ExitUsage)
			if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
			if strings.Contains(r.stderr, "user:pw") || strings.Contains(r.stderr, "soon") {
				t.Fatalf("argument value echoed: %q", r.stderr)
			}
		})
	}
	t.Run("no url", func(t *testing.T) {
		r := runForge(t, map[string]string{"FORGE_OWNER_TOKEN": testToken}, "", "status", "j_1")
		wantCode(t, r, ExitUsage)
		if !strings.Contains(r.stderr, "forge: hint: pass -url or set FORGE_GATE_URL") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
	t.Run("help", func(t *testing.T) {
		r := runForge(t, env, "", "wait", "-h")
		wantCode(t, r, ExitOK)
		if !strings.Contains(r.stderr, "-timeout") || r.stdout != "" {
			t.Fatalf("help %q", r.stderr)
		}
	})
	if n := len(g.recordedRequests()); n != 0 {
		t.Fatalf("usage errors sent %d requests", n)
	}
}

func TestTokenHandling(t *testing.T) {
	g := newFakeGate(t, testToken)
	t.Run("missing", func(t *testing.T) {
		r := runForge(t, map[string]string{"FORGE_GATE_URL": g.srv.URL}, "", "status", "j_1")
		wantCode(t, r, ExitErr)
		if !strings.Contains(r.stderr, "environment variable FORGE_OWNER_TOKEN is not set") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
	t.Run("empty", func(t *testing.T) {
		r := runForge(t, map[string]string{"FORGE_GATE_URL": g.srv.URL, "FORGE_OWNER_TOKEN": ""}, "", "status", "j_1")
		wantCode(t, r, ExitErr)
	})
	t.Run("malformed", func(t *testing.T) {
		r := runForge(t, map[string]string{"FORGE_GATE_URL": g.srv.URL, "FORGE_OWNER_TOKEN": testToken + " x\n"}, "", "status", "j_1")
		wantCode(t, r, ExitErr)
	})
	t.Run("other variable", func(t *testing.T) {
		env := map[string]string{"FORGE_GATE_URL": g.srv.URL, "MY_TOKEN": testToken}
		r := runForge(t, env, `{"input":"x"}`, "submit", "-token-env", "MY_TOKEN", "-file", "-")
		wantCode(t, r, ExitOK)
	})
	t.Run("wrong token is 401", func(t *testing.T) {
		env := map[string]string{"FORGE_GATE_URL": g.srv.URL, "FORGE_OWNER_TOKEN": "worker-token"}
		r := runForge(t, env, "", "status", "j_0001")
		wantCode(t, r, ExitErr)
		if !strings.HasPrefix(r.stderr, "forge: error: unauthorized: owner token required\nforge: hint: check that FORGE_OWNER_TOKEN holds the owner token") {
			t.Fatalf("stderr %q", r.stderr)
		}
		if strings.Contains(r.stderr, "worker-token") {
			t.Fatal("wrong token echoed")
		}
	})
	t.Run("token never in argv", func(t *testing.T) {
		// There is no flag that takes the token value itself.
		r := runForge(t, gateEnv(g), "", "status", "-token", testToken, "j_0001")
		wantCode(t, r, ExitUsage)
	})
}

func TestGateErrorMapping(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	r := runForge(t, env, "", "status", "j_nope")
	wantCode(t, r, ExitErr)
	if !strings.HasPrefix(r.stderr, "forge: error: not_found: no such job\nforge: hint: ") {
		t.Fatalf("stderr %q", r.stderr)
	}
	g.setRaw("/v1/jobs/j_500", http.StatusInternalServerError, "<html>panic: /srv/secret/path</html>")
	r = runForge(t, env, "", "status", "j_500")
	wantCode(t, r, ExitErr)
	if r.stderr != "forge: error: Gate answered HTTP 500\n" {
		t.Fatalf("stderr %q", r.stderr)
	}
	g.setRaw("/v1/jobs/j_ctl", http.StatusBadRequest, `{"error":{"code":"invalid_json","message":"bad\u001b[2Jtext"}}`)
	r = runForge(t, env, "", "status", "j_ctl")
	if r.stderr != "forge: error: invalid_json\n" {
		t.Fatalf("control characters in a Gate message must be dropped: %q", r.stderr)
	}
	g.setRaw("/v1/jobs/j_src", http.StatusBadGateway,
		`{"error":{"code":"source_failed","message":"the public source could not be prepared","phase":"fetch","reason":"redirect","retryable":false}}`)
	r = runForge(t, env, "", "status", "j_src")
	if r.stderr != "forge: error: source_failed: the public source could not be prepared (phase fetch, reason redirect)\n" {
		t.Fatalf("source failure: %q", r.stderr)
	}
	g.setRaw("/v1/jobs/j_src", http.StatusServiceUnavailable,
		`{"error":{"code":"source_failed","message":"retry later","phase":"clone","reason":"timeout","retryable":true}}`)
	r = runForge(t, env, "", "status", "j_src")
	if r.stderr != "forge: error: source_failed: retry later (phase clone, reason timeout, retryable)\n" {
		t.Fatalf("retryable source failure: %q", r.stderr)
	}
	g.setRaw("/v1/jobs/j_src", http.StatusBadGateway, `{"error":{"code":"source_failed","message":"m","phase":"/srv/x","reason":"r","retryable":false}}`)
	r = runForge(t, env, "", "status", "j_src")
	if r.stderr != "forge: error: source_failed: m\n" {
		t.Fatalf("a phase that is not a word must not be shown: %q", r.stderr)
	}
}

func TestStrictResponseDecoding(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	good := `{"id":"j_x","kind":"text","status":"pending","attempt_count":0,"created_at":"` + t0 + `","updated_at":"` + t0 + `"}`
	g.setRaw("/v1/jobs/j_x", http.StatusOK, good)
	wantCode(t, runForge(t, env, "", "status", "j_x"), ExitOK)
	bad := map[string]string{
		"unknown field":    strings.Replace(good, `"id"`, `"secret_input":"x","id"`, 1),
		"duplicate key":    strings.Replace(good, `"id":"j_x"`, `"id":"j_x","id":"j_x"`, 1),
		"case variant":     strings.Replace(good, `"kind"`, `"Kind"`, 1),
		"null":             strings.Replace(good, `"status":"pending"`, `"status":"pending","result":null`, 1),
		"wrong type":       strings.Replace(good, `"attempt_count":0`, `"attempt_count":"1"`, 1),
		"no attempt_count": strings.Replace(good, `"attempt_count":0,`, ``, 1),
		"trailing":         good + `{}`,
		"not json":         `hello`,
		"array":            `[]`,
		"bad kind":         strings.Replace(good, `"text"`, `"shell"`, 1),
		"bad status":       strings.Replace(good, `"pending"`, `"running"`, 1),
		"local time":       strings.Replace(good, `"created_at":"`+t0, `"created_at":"2026-11-29T19:20:17+01:00`, 1),
		"missing created":  strings.Replace(good, `"created_at":"`+t0+`",`, ``, 1),
		"other id":         strings.Replace(good, `"j_x"`, `"j_y"`, 1),
		"result on coding": strings.Replace(strings.Replace(good, `"text"`, `"coding"`, 1),
			`"status":"pending"`, `"status":"pending","result":"x"`, 1),
		"short sha": strings.Replace(strings.Replace(good, `"text"`, `"coding"`, 1),
			`"status":"pending"`, `"status":"pending","candidate_sha":"abc"`, 1),
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			g.setRaw("/v1/jobs/j_x", http.StatusOK, body)
			r := runForge(t, env, "", "status", "j_x")
			wantCode(t, r, ExitErr)
			if r.stdout != "" || !strings.HasPrefix(r.stderr, "forge: error: invalid Gate response") {
				t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}
	aggBad := map[string]string{
		"attempts missing": `{"job":` + good + `,"events":[]}`,
		"events unordered": `{"job":` + good + `,"attempts":[],"events":[{"seq":2,"type":"leased","at":"` + t0 + `"},{"seq":1,"type":"submitted","at":"` + t0 + `"}]}`,
		"attempt unordered": `{"job":` + good + `,"attempts":[` +
			`{"id":"a2","ordinal":2,"status":"expired","worker_id":"w","leased_at":"` + t0 + `","evidence":[]},` +
			`{"id":"a1","ordinal":1,"status":"expired","worker_id":"w","leased_at":"` + t0 + `","evidence":[]}],"events":[]}`,
		"evidence missing":    `{"job":` + good + `,"attempts":[{"id":"a1","ordinal":1,"status":"leased","worker_id":"w","leased_at":"` + t0 + `"}],"events":[]}`,
		"attempt status":      `{"job":` + good + `,"attempts":[{"id":"a1","ordinal":1,"status":"weird","worker_id":"w","leased_at":"` + t0 + `","evidence":[]}],"events":[]}`,
		"disposition":         `{"job":` + good + `,"attempts":[{"id":"a1","ordinal":1,"status":"failed","worker_id":"w","leased_at":"` + t0 + `","disposition":"maybe","evidence":[]}],"events":[]}`,
		"event type":          `{"job":` + good + `,"attempts":[],"events":[{"seq":1,"type":"exploded","at":"` + t0 + `"}]}`,
		"evidence not object": `{"job":` + good + `,"attempts":[{"id":"a1","ordinal":1,"status":"leased","worker_id":"w","leased_at":"` + t0 + `","evidence":[1]}],"events":[]}`,
		"evidence dup key":    `{"job":` + good + `,"attempts":[{"id":"a1","ordinal":1,"status":"leased","worker_id":"w","leased_at":"` + t0 + `","evidence":[{"a":1,"a":2}]}],"events":[]}`,
	}
	aggGood := `{"job":` + good + `,"attempts":[{"id":"a1","ordinal":1,"status":"failed","worker_id":"w","leased_at":"` + t0 +
		`","disposition":"retryable","evidence":[]}],"events":[{"seq":1,"type":"retry_scheduled","at":"` + t0 + `"}]}`
	g.setRaw("/v1/jobs/j_x/aggregate", http.StatusOK, aggGood)
	if r := runForge(t, env, "", "result", "j_x"); r.code != ExitOK || !strings.Contains(r.stdout, `"disposition": "retryable"`) {
		t.Fatalf("valid aggregate: %d %q %q", r.code, r.stdout, r.stderr)
	}
	for name, body := range aggBad {
		t.Run(name, func(t *testing.T) {
			g.setRaw("/v1/jobs/j_x/aggregate", http.StatusOK, body)
			r := runForge(t, env, "", "result", "j_x")
			wantCode(t, r, ExitErr)
			if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
	t.Run("oversized", func(t *testing.T) {
		huge := strings.Replace(good, `"status":"pending"`, `"status":"pending","result":"`+strings.Repeat("a", maxResponseBytes)+`"`, 1)
		g.setRaw("/v1/jobs/j_x", http.StatusOK, huge)
		r := runForge(t, env, "", "status", "j_x")
		wantCode(t, r, ExitErr)
		if !strings.Contains(r.stderr, "exceeds") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
	t.Run("events must be ordered", func(t *testing.T) {
		g.setRaw("/v1/jobs/j_x/events", http.StatusOK, `[{"seq":1,"type":"submitted","at":"`+t0+`"},{"seq":1,"type":"leased","at":"`+t0+`"}]`)
		wantCode(t, runForge(t, env, "", "events", "j_x"), ExitErr)
	})
}

func TestBadTaskFilesSendNothing(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	sha := "0123456789abcdef0123456789abcdef01234567"
	cases := map[string]string{
		"empty":            ``,
		"array":            `[{"input":"x"}]`,
		"null":             `null`,
		"null field":       `{"input":null}`,
		"unknown":          `{"input":"x","prompt":"y"}`,
		"duplicate":        `{"input":"x","input":"y"}`,
		"case variant":     `{"Input":"x"}`,
		"mixed":            `{"input":"x","instruction":"y"}`,
		"empty object":     `{}`,
		"empty input":      `{"input":""}`,
		"long input":       `{"input":"` + strings.Repeat("x", maxTextBytes+1) + `"}`,
		"coding no sha":    `{"repository_id":"r","instruction":"y"}`,
		"short sha":        `{"repository_id":"r","base_sha":"abc","instruction":"y"}`,
		"upper sha":        `{"repository_id":"r","base_sha":"` + strings.ToUpper(sha) + `","instruction":"y"}`,
		"half author":      `{"repository_id":"r","base_sha":"` + sha + `","instruction":"y","commit_author_name":"a"}`,
		"empty argv":       `{"repository_id":"r","base_sha":"` + sha + `","instruction":"y","tests":[[]]}`,
		"tests wrong type": `{"repository_id":"r","base_sha":"` + sha + `","instruction":"y","tests":["go test"]}`,
		"trailing":         `{"input":"x"} {}`,
		"too large":        `{"input":"` + strings.Repeat(" ", maxTaskBytes) + `"}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			r := runForge(t, env, body, "submit", "-file", "-")
			wantCode(t, r, ExitErr)
			if !strings.HasPrefix(r.stderr, "forge: error: task file: ") || r.stdout != "" {
				t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "private-name.json")
		r := runForge(t, env, "", "submit", "-file", path)
		wantCode(t, r, ExitErr)
		if strings.Contains(r.stderr, "private-name") || !strings.Contains(r.stderr, "does not exist") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
	if n := len(g.recordedRequests()); n != 0 {
		t.Fatalf("bad tasks sent %d requests", n)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	target := newFakeGate(t, testToken)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	env := map[string]string{"FORGE_GATE_URL": redirector.URL, "FORGE_OWNER_TOKEN": testToken}
	r := runForge(t, env, "", "status", "j_1")
	wantCode(t, r, ExitErr)
	if !strings.Contains(r.stderr, "redirects are not followed") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if n := len(target.recordedRequests()); n != 0 {
		t.Fatalf("redirect target got %d requests", n)
	}
}

func TestUnreachableGate(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	env := map[string]string{"FORGE_GATE_URL": url, "FORGE_OWNER_TOKEN": testToken}
	r := runForge(t, env, "", "wait", "-poll", "10ms", "j_1")
	wantCode(t, r, ExitErr)
	if !strings.HasPrefix(r.stderr, "forge: error: cannot reach the Gate: ") || strings.Contains(r.stderr, url) {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestGatePathPrefix(t *testing.T) {
	g := newFakeGate(t, testToken)
	inner := g.srv.Config.Handler
	g.srv.Config.Handler = http.StripPrefix("/forge", inner)
	env := map[string]string{"FORGE_GATE_URL": g.srv.URL + "/forge/", "FORGE_OWNER_TOKEN": testToken}
	r := runForge(t, env, `{"input":"x"}`, "submit", "-file", "-")
	wantCode(t, r, ExitOK)
}

func TestWaitProgress(t *testing.T) {
	g := newFakeGate(t, testToken)
	env := gateEnv(g)
	submit := func() string {
		r := runForge(t, env, `{"input":"stages"}`, "submit", "-file", "-")
		wantCode(t, r, ExitOK)
		return decodeOut[Job](t, r).ID
	}

	id := submit()
	r := runForge(t, env, "", "wait", "-poll", "10ms", "-progress", id)
	wantCode(t, r, ExitOK)
	want := "forge: progress: analyzing (attempt 1 on worker-1#1)\nforge: progress: editing (attempt 1 on worker-1#1)\n"
	if r.stderr != want {
		t.Fatalf("progress %q, want %q", r.stderr, want)
	}
	if decodeOut[Aggregate](t, r).Job.Status != "succeeded" {
		t.Fatal("aggregate not printed")
	}

	// stderr is not a terminal here: no progress without the flag.
	r = runForge(t, env, "", "wait", "-poll", "10ms", submit())
	wantCode(t, r, ExitOK)
	if r.stderr != "" {
		t.Fatalf("unrequested progress %q", r.stderr)
	}

	// A Gate without the route (or a bad answer) turns progress off quietly.
	for name, body := range map[string]string{
		"missing": `{"error":{"code":"not_found","message":"no such route"}}`,
		"invalid": `{"live":true,"activity":[{"attempt":1,"attempt_id":"a","worker_id":"w","stage":"compiling","at":"` + t1 + `"}],"as_of":"` + t1 + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			id := submit()
			status := http.StatusNotFound
			if name == "invalid" {
				status = http.StatusOK
			}
			g.setRaw("/v1/debug/jobs/"+id+"/activity", status, body)
			r := runForge(t, env, "", "wait", "-poll", "10ms", "-progress", id)
			wantCode(t, r, ExitOK)
			if r.stderr != "" {
				t.Fatalf("stderr %q", r.stderr)
			}
		})
	}
	wantCode(t, runForge(t, env, "", "submit", "-file", "-", "-progress"), ExitUsage)
}

// A server that echoes the Authorization value in its error message (a
// proxy, the wrong service) must not make the CLI print the token.
func TestServerMessageEchoingTokenIsDropped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"code":"unauthorized","message":"bad token %s"}}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	defer srv.Close()
	r := runForge(t, map[string]string{"FORGE_GATE_URL": srv.URL, "FORGE_OWNER_TOKEN": testToken}, "", "status", "j_0001")
	wantCode(t, r, ExitErr)
	if strings.Contains(r.stderr, testToken) || strings.Contains(r.stdout, testToken) {
		t.Fatalf("token printed: %q", r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "forge: error: unauthorized\n") {
		t.Fatalf("stderr %q, want the code without the echoing message", r.stderr)
	}
}

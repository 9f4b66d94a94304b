package gate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

const testSHA = "0123456789abcdef0123456789abcdef01234567"

func TestAuthentication(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)

	for _, tok := range []string{"", "wrong-token", testWorkerToken} {
		code, body := tg.api("POST", "/v1/jobs", tok, []byte(`{"input":"x"}`))
		if code != http.StatusUnauthorized || string(body) != `{"error":{"code":"unauthorized","message":"a valid owner token is required"}}`+"\n" {
			t.Fatalf("owner route with token %q: %d %s", tok, code, body)
		}
	}
	// The worker endpoint refuses bad and owner tokens before any upgrade.
	for _, tok := range []string{"", "wrong-token", testOwnerToken} {
		req, _ := http.NewRequest("GET", "http://"+tg.addr+wire.Path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Upgrade") != "" ||
			string(body) != `{"error":{"code":"unauthorized","message":"a valid worker token is required"}}`+"\n" {
			t.Fatalf("worker endpoint with token %q: %d %s", tok, resp.StatusCode, body)
		}
		if _, err := dialWorker(t, tg.addr, tok); err == nil {
			t.Fatalf("dial with token %q succeeded", tok)
		}
	}
	// A worker token upgrades.
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	if w.welcome.Lane != "worker-1" || !ident.ValidHexID(w.welcome.Generation) {
		t.Fatalf("welcome %+v", w.welcome)
	}
}

func TestHelloValidation(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	for name, h := range map[string]wire.Hello{
		"other worker id": {Protocol: wire.Protocol, WorkerID: "worker-2", Slot: 0},
		"slot too high":   {Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 4},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := dialWorker(t, tg.addr, testWorkerToken)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h := h
			if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: &h}); err != nil {
				t.Fatal(err)
			}
			e, err := c.Receive()
			if err != nil || e.Reject == nil || e.Reject.Code != wire.RejectInvalid || e.Seq != 0 {
				t.Fatalf("got %+v %v", e, err)
			}
			if _, err := c.Receive(); err == nil {
				t.Fatal("connection stayed open")
			}
		})
	}
	// A request before hello closes the connection.
	c, err := dialWorker(t, tg.addr, testWorkerToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Send(wire.Envelope{Type: wire.TypeHeartbeat, Seq: 1, Heartbeat: &wire.Heartbeat{JobID: "j", AttemptID: "a"}})
	if _, err := c.Receive(); err == nil {
		t.Fatal("connection stayed open")
	}
}

func TestSubmitLeaseResult(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	if w.welcome.Lane != "worker-1#1" {
		t.Fatalf("lane %q", w.welcome.Lane)
	}
	job := tg.submit(`{"input":"hello"}`)
	if job.Status != "pending" || job.Kind != "text" || len(job.ID) != 32 {
		t.Fatalf("submitted %+v", job)
	}
	l := w.lease()
	want := policy.Resolve(cfg.Lifecycle, cfg.DefaultExecution).Canonical()
	if l.JobID != job.ID || l.Ordinal != 1 || l.Kind != wire.KindText || string(l.Policy) != string(want) || string(l.Task) != `{"input":"hello"}` {
		t.Fatalf("lease %+v", l)
	}
	if !l.DeadlineAt.Equal(tg.clock.Now().Add(30 * time.Second)) {
		t.Fatalf("deadline %v", l.DeadlineAt)
	}
	if got := tg.job(job.ID); got.Status != "leased" || got.AttemptCount != 1 {
		t.Fatalf("job %+v", got)
	}
	// Heartbeat strictly before the deadline extends it by the TTL.
	tg.clock.Advance(10 * time.Second)
	hb := w.heartbeat(l)
	wantAck(t, hb)
	if !hb.Ack.DeadlineAt.Equal(tg.clock.Now().Add(30 * time.Second)) {
		t.Fatalf("heartbeat deadline %v", hb.Ack.DeadlineAt)
	}
	// A result for another attempt id is stale.
	other := *l
	other.AttemptID = strings.Repeat("f", 32)
	wantReject(t, w.textResult(&other, "HELLO"), wire.RejectStale)
	// A coding-shaped result for a text job is invalid.
	wantReject(t, w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID, Outcome: wire.OutcomeSucceeded, CandidateSHA: testSHA}}), wire.RejectInvalid)
	wantAck(t, w.textResult(l, "HELLO"))
	// Identical replay is idempotent; a different result conflicts.
	wantAck(t, w.textResult(l, "HELLO"))
	wantReject(t, w.textResult(l, "OTHER"), wire.RejectConflict)
	// Heartbeats for a finished attempt are stale.
	wantReject(t, w.heartbeat(l), wire.RejectStale)

	got := tg.job(job.ID)
	if got.Status != "succeeded" || got.Result == nil || *got.Result != "HELLO" {
		t.Fatalf("job %+v", got)
	}
	code, body := tg.api("GET", "/v1/jobs/"+job.ID+"/aggregate", testOwnerToken, nil)
	if code != 200 {
		t.Fatalf("aggregate %d", code)
	}
	var agg struct {
		Job      map[string]any   `json:"job"`
		Attempts []map[string]any `json:"attempts"`
		Events   []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(body, &agg); err != nil {
		t.Fatal(err)
	}
	if len(agg.Attempts) != 1 || agg.Attempts[0]["worker_id"] != "worker-1#1" || agg.Attempts[0]["status"] != "succeeded" {
		t.Fatalf("attempts %s", body)
	}
	if ev, ok := agg.Attempts[0]["evidence"].([]any); !ok || len(ev) != 0 {
		t.Fatalf("evidence must be an empty array: %s", body)
	}
	var types []string
	for _, e := range agg.Events {
		types = append(types, e["type"].(string))
	}
	if strings.Join(types, ",") != "submitted,leased,succeeded" {
		t.Fatalf("events %v", types)
	}
	code, body = tg.api("GET", "/v1/jobs/"+job.ID+"/events", testOwnerToken, nil)
	if code != 200 || !contains(body, `"type":"leased","at":`) {
		t.Fatalf("events %d %s", code, body)
	}
	// The lane is idle again: the next job is pushed to it.
	job2 := tg.submit(`{"input":"again"}`)
	if l2 := w.lease(); l2.JobID != job2.ID {
		t.Fatalf("second lease %+v", l2)
	}
}

func TestHeartbeatAfterDeadlineRejected(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	tg.submit(`{"input":"x"}`)
	l := w.lease()
	// At exactly the deadline the heartbeat is too late. The sweep may get
	// there first (then the lane also receives cancel); either way the
	// heartbeat is refused as expired.
	tg.clock.Advance(30 * time.Second)
	wantReject(t, w.heartbeat(l), wire.RejectExpired)
}

func TestExpiryRetryLateResult(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	tg.clock.Advance(31 * time.Second)
	c := w.push()
	if c.Cancel == nil || c.Cancel.AttemptID != l1.AttemptID || c.Cancel.Reason != wire.CancelExpired {
		t.Fatalf("want cancel, got %+v", c)
	}
	j := tg.job(job.ID)
	if j.Status != "retry_wait" || j.RetryAt != tg.clock.Now().Add(time.Second).Format(store.TimeFormat) {
		t.Fatalf("job after expiry %+v (now %v)", j, tg.clock.Now())
	}
	// The late result of the expired attempt is refused.
	wantReject(t, w.textResult(l1, "late"), wire.RejectExpired)
	// Once the backoff has passed the job is leased again, ordinal 2.
	tg.clock.Advance(time.Second)
	l2 := w.lease()
	if l2.JobID != job.ID || l2.Ordinal != 2 || l2.AttemptID == l1.AttemptID || string(l2.Policy) != string(l1.Policy) {
		t.Fatalf("retry lease %+v", l2)
	}
	wantAck(t, w.textResult(l2, "ok"))
	if j := tg.job(job.ID); j.Status != "succeeded" || j.AttemptCount != 2 {
		t.Fatalf("job %+v", j)
	}
}

func TestMaxAttempts(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		m["lifecycle"] = map[string]any{"lease_ttl": "30s", "retry_base": "1s", "max_attempts": 2}
	})
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	wantAck(t, w.failResult(l1, wire.FailureExecution))
	if j := tg.job(job.ID); j.Status != "retry_wait" {
		t.Fatalf("after first failure %+v", j)
	}
	tg.clock.Advance(time.Second)
	l2 := w.lease()
	if l2.Ordinal != 2 {
		t.Fatalf("ordinal %d", l2.Ordinal)
	}
	wantAck(t, w.failResult(l2, wire.FailureExecution))
	if j := tg.job(job.ID); j.Status != "failed" || j.FailureCode != "max_attempts_exceeded" {
		t.Fatalf("job %+v", j)
	}
	// A terminal failure ends a job at once with its own code.
	job2 := tg.submit(`{"input":"y"}`)
	l3 := w.lease()
	if l3.JobID != job2.ID {
		t.Fatal("wrong job")
	}
	wantAck(t, w.failResult(l3, wire.FailureInvalidTask))
	if j := tg.job(job2.ID); j.Status != "failed" || j.FailureCode != "invalid_task" || j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
}

func TestRestartMidLease(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	clk := newClock()
	tg := startGate(t, cfg, sec, "", clk)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	db := tg.db
	tg.stop()

	// A new Gate on the same file: the lease survives the restart.
	tg2 := startGate(t, cfg, sec, db, clk)
	if j := tg2.job(job.ID); j.Status != "leased" {
		t.Fatalf("after restart %+v", j)
	}
	w2 := connect(t, tg2.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	// The old generation is gone: the reconnected lane cannot finish it.
	wantReject(t, w2.textResult(l1, "x"), wire.RejectStale)
	// The sweep expires it and schedules the retry with backoff.
	clk.Advance(31 * time.Second)
	j := tg2.waitJob(job.ID, "retry_wait")
	if j.RetryAt != clk.Now().Add(time.Second).Format(store.TimeFormat) {
		t.Fatalf("retry_at %s", j.RetryAt)
	}
	clk.Advance(time.Second)
	l2 := w2.lease()
	if l2.JobID != job.ID || l2.Ordinal != 2 {
		t.Fatalf("retry %+v", l2)
	}
	wantAck(t, w2.textResult(l2, "done"))
	code, body := tg2.api("GET", "/v1/jobs/"+job.ID+"/events", testOwnerToken, nil)
	if code != 200 || !contains(body, `"type":"expired"`) || !contains(body, `"type":"retry_scheduled"`) {
		t.Fatalf("events %s", body)
	}
}

func TestGenerationTakeover(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	old := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	tg.submit(`{"input":"x"}`)
	l1 := old.lease()
	// Started, so the takeover leaves it leased to the old generation (an
	// unstarted one goes back to the queue: TestTakeoverReturnsUnstartedLease).
	wantAck(t, old.heartbeat(l1))

	repl := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	if repl.welcome.Lane != "worker-1" || repl.welcome.Generation == old.welcome.Generation {
		t.Fatalf("welcome %+v", repl.welcome)
	}
	select {
	case <-old.closed:
	case <-time.After(waitLimit):
		t.Fatal("old connection not closed")
	}
	// The old attempt is bound to the fenced generation.
	wantReject(t, repl.heartbeat(l1), wire.RejectStale)
	wantReject(t, repl.textResult(l1, "x"), wire.RejectStale)
	// The old connection's disconnect did not mark the replacement offline:
	// it still receives leases.
	job2 := tg.submit(`{"input":"y"}`)
	if l2 := repl.lease(); l2.JobID != job2.ID {
		t.Fatalf("lease %+v", l2)
	}
}

func TestPoolsAndCapabilities(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) {
		m["workers"] = append(m["workers"].([]any), map[string]any{"id": "worker-2", "pool": "text", "token_env": "W2", "concurrency": 1})
		m["default_pool"] = "text"
	})
	tg := startGate(t, cfg, sec, "", nil)
	coding := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	noRepo := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	text := connect(t, tg.addr, "worker-two-token-0001", "worker-2", 0, []string{"reference"}, noRepos())

	cj := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it.","tests":[["go","test","./..."]],"commit_author_name":"A B","commit_author_email":"a@example.com"}`)
	if l := coding.lease(); l.JobID != cj.ID || l.Kind != wire.KindCoding {
		t.Fatalf("coding lease %+v", l)
	} else {
		want := policy.Resolve(cfg.Lifecycle, cfg.Repositories[0].Execution).Canonical()
		if string(l.Policy) != string(want) {
			t.Fatalf("coding policy %s", l.Policy)
		}
		task, err := wire.DecodeCodingTask(l.Task)
		if err != nil || task.CommitAuthorEmail != "a@example.com" || len(task.Tests) != 1 {
			t.Fatalf("task %+v %v", task, err)
		}
	}
	tj := tg.submit(`{"input":"x"}`)
	if l := text.lease(); l.JobID != tj.ID {
		t.Fatalf("text lease %+v", l)
	}
	// Neither lane outside its pool/capabilities got anything: a second
	// coding job waits (worker-1#1 lacks the repository, worker-1 is busy).
	cj2 := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Again."}`)
	select {
	case e := <-noRepo.pushes:
		t.Fatalf("lane without the repository got %+v", e)
	case e := <-text.pushes:
		t.Fatalf("text-pool lane got %+v", e)
	default:
	}
	if j := tg.job(cj2.ID); j.Status != "pending" {
		t.Fatalf("job %+v", j)
	}
}

func TestOwnerAPIErrors(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	huge := `{"input":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/v1/jobs/" + strings.Repeat("a", 32), "", 404, "not_found"},
		{"GET", "/v1/jobs/bad%2Fid", "", 404, "not_found"},
		{"GET", "/v1/nothing", "", 404, "not_found"},
		{"DELETE", "/v1/jobs", "", 405, "method_not_allowed"},
		{"POST", "/v1/jobs/abc", "", 405, "method_not_allowed"},
		{"POST", "/v1/jobs", huge, 413, "too_large"},
		{"POST", "/v1/jobs", `{"input":"x"`, 400, "invalid_json"},
		{"POST", "/v1/jobs", `{"input":"x","input":"y"}`, 400, "invalid_json"},
		{"POST", "/v1/jobs", `{"input":"x","secret":"s3cr3t"}`, 400, "invalid_json"},
		{"POST", "/v1/jobs", `{"input":""}`, 400, "invalid_task"},
		{"POST", "/v1/jobs", `{"repository_id":"unknown","base_sha":"` + testSHA + `","instruction":"x"}`, 400, "invalid_task"},
		{"POST", "/v1/jobs", `{"repository_id":"agent-forge","base_sha":"ABC","instruction":"x"}`, 400, "invalid_task"},
		{"POST", "/v1/jobs", `{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"x","commit_author_name":"A"}`, 400, "invalid_task"},
	}
	for _, tc := range cases {
		code, body := tg.api(tc.method, tc.path, testOwnerToken, []byte(tc.body))
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &eb); err != nil || code != tc.status || eb.Error.Code != tc.code || eb.Error.Message == "" {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, code, body)
		}
		if contains(body, "s3cr3t") || contains(body, "store:") {
			t.Errorf("error leaks internals: %s", body)
		}
	}
}

// A body declared larger than the limit is refused at once, without
// waiting for (or reading) any of it.
func TestDeclaredOversizeBodyRefusedAtOnce(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	c, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", testOwnerToken, MaxBodyBytes+1)
	c.SetReadDeadline(time.Now().Add(waitLimit)) // the server would wait 60 s for the body
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !contains(body, `"too_large"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestReadyzOnlyAfterStartupSweep(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	st, err := store.Open(context.Background(), t.TempDir()+"/state/forge.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := New(cfg, sec, st, discardLog(), newClock().Now)
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler()
	get := func(path, tok string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get("/readyz", ""); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"not_ready"`) {
		t.Fatalf("before start: %d %s", rec.Code, rec.Body)
	}
	if rec := get("/v1/jobs/abc", testOwnerToken); rec.Code != 503 {
		t.Fatalf("owner route before start: %d", rec.Code)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := get("/readyz", ""); rec.Code != 200 || rec.Body.String() != `{"status":"ready"}`+"\n" {
		t.Fatalf("after start: %d %s", rec.Code, rec.Body)
	}
}

func TestStoreFailureStopsGate(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	tg.st.Close() // the next sweep fails
	select {
	case err := <-tg.done:
		if err == nil || !strings.Contains(err.Error(), "store failure") {
			t.Fatalf("gate stopped with %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("gate kept running without a store")
	}
	tg.cancel = nil // already stopped
}

func TestCodingEvidenceAndResult(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), []string{"agent-forge"})
	job := tg.submit(`{"repository_id":"agent-forge","base_sha":"` + testSHA + `","instruction":"Fix it.","tests":[["make"]]}`)
	l := w.lease()
	success := func(sha string) wire.Envelope {
		return w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID, Outcome: wire.OutcomeSucceeded,
			CandidateSHA: sha, AgentReport: &wire.AgentReport{Summary: "Fixed it.", Changes: []string{"edited a.go"}}}})
	}
	// A candidate needs acknowledged evidence that created it.
	wantReject(t, success(strings.Repeat("b", 40)), wire.RejectInvalid)
	ev := func(batch int, recs ...string) wire.Envelope {
		raw := make([]json.RawMessage, len(recs))
		for i, r := range recs {
			raw[i] = json.RawMessage(r)
		}
		return w.request(wire.Envelope{Type: wire.TypeEvidence, Evidence: &wire.Evidence{JobID: l.JobID, AttemptID: l.AttemptID, Batch: batch, Records: raw}})
	}
	check := `{"phase":"scoped_check","reason":"passed","index":0,"sha":"` + strings.Repeat("b", 40) + `","exit_code":0,"duration_ms":1,"arg_count":1,"args":["[REDACTED]"],"output":"","output_redacted":false,"output_truncated":false}`
	created := `{"phase":"candidate_commit","reason":"created","sha":"` + strings.Repeat("b", 40) + `"}`
	cleanup := `{"phase":"cleanup","reason":"cleanup_failed"}`
	wantReject(t, ev(2, cleanup), wire.RejectInvalid) // out of order
	wantAck(t, ev(1, check, created))
	wantAck(t, ev(1, check, created)) // identical replay
	wantReject(t, ev(1, `{"phase":"plugin","reason":"failed"}`), wire.RejectConflict)
	wantAck(t, ev(2, cleanup))
	// A text result for a coding job is invalid.
	wantReject(t, w.textResult(l, "x"), wire.RejectInvalid)
	// The result names exactly the candidate the evidence created.
	wantReject(t, success(strings.Repeat("d", 40)), wire.RejectInvalid)
	wantReject(t, success(testSHA), wire.RejectInvalid)
	wantAck(t, success(strings.Repeat("b", 40)))
	wantAck(t, success(strings.Repeat("b", 40)))
	code, body := tg.api("GET", "/v1/jobs/"+job.ID+"/aggregate", testOwnerToken, nil)
	if code != 200 {
		t.Fatal(code)
	}
	var agg struct {
		Job struct {
			Status       string `json:"status"`
			CandidateSHA string `json:"candidate_sha"`
		} `json:"job"`
		Attempts []struct {
			AgentReport map[string]any   `json:"agent_report"`
			Evidence    []map[string]any `json:"evidence"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(body, &agg); err != nil {
		t.Fatal(err)
	}
	if agg.Job.Status != "succeeded" || agg.Job.CandidateSHA != strings.Repeat("b", 40) || len(agg.Attempts) != 1 {
		t.Fatalf("aggregate %s", body)
	}
	a := agg.Attempts[0]
	if len(a.Evidence) != 3 || a.Evidence[2]["phase"] != "cleanup" || a.AgentReport["self_reported"] != true || a.AgentReport["summary"] != "Fixed it." {
		t.Fatalf("attempt %s", body)
	}
	// DECISIONS 7: the candidate is a coding job's result, which debug
	// routes never carry.
	for _, path := range []string{"/v1/debug/jobs", "/v1/debug/jobs/" + job.ID} {
		code, body := tg.api("GET", path, testOwnerToken, nil)
		if code != 200 || !contains(body, job.ID) || contains(body, strings.Repeat("b", 40)) || contains(body, "candidate") {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
}

func TestConnectionsPerWorkerBounded(t *testing.T) {
	cfg, sec := testConfig(t, func(m map[string]any) { worker0(m)["concurrency"] = 1 })
	tg := startGate(t, cfg, sec, "", nil)
	// Concurrency 1 allows the lane plus one takeover in progress.
	for i := 0; i < 2; i++ {
		c, err := dialWorker(t, tg.addr, testWorkerToken)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
	}
	if c, err := dialWorker(t, tg.addr, testWorkerToken); err == nil {
		c.Close()
		t.Fatal("third connection accepted")
	}
}

func TestRacingTakeoversLeaveOneLiveLane(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	const n = 6
	ws := make(chan *rawWorker, n)
	for i := 0; i < n; i++ {
		go func() {
			c, err := dialWorker(t, tg.addr, testWorkerToken)
			if err != nil {
				ws <- nil
				return
			}
			w := &rawWorker{t: t, c: c, replies: make(chan wire.Envelope, 64), pushes: make(chan wire.Envelope, 64), closed: make(chan struct{})}
			c.Send(wire.Envelope{Type: wire.TypeHello, Hello: &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 2, Plugins: plugins()}})
			if e, err := c.Receive(); err == nil && e.Welcome != nil {
				w.welcome = *e.Welcome
				go w.read()
				ws <- w
				return
			}
			c.Close()
			ws <- nil
		}()
	}
	var all []*rawWorker
	for i := 0; i < n; i++ {
		if w := <-ws; w != nil {
			all = append(all, w)
			defer w.c.Close()
		}
	}
	// Every connection but the registry's live one is closed by the Gate.
	tg.g.lanes.mu.Lock()
	gen := tg.g.lanes.lanes["worker-1#2"].generation
	tg.g.lanes.mu.Unlock()
	var live *rawWorker
	for _, w := range all {
		if w.welcome.Generation == gen {
			live = w
			continue
		}
		select {
		case <-w.closed:
		case <-time.After(waitLimit):
			t.Fatal("a superseded connection stayed open")
		}
	}
	if live == nil {
		t.Fatal("the live generation belongs to no welcomed connection")
	}
	job := tg.submit(`{"input":"x"}`)
	if l := live.lease(); l.JobID != job.ID {
		t.Fatalf("lease %+v", l)
	}
}

func TestIdentify(t *testing.T) {
	_, sec := testConfig(t, nil)
	cases := []struct {
		headers []string
		owner   bool
		worker  int
	}{
		{[]string{"Bearer " + testOwnerToken}, true, -1},
		{[]string{"bearer " + testOwnerToken}, true, -1},
		{[]string{"Bearer " + testWorkerToken}, false, 0},
		{[]string{"Bearer " + testOwnerToken, "Bearer " + testOwnerToken}, false, -1},
		{[]string{"Basic " + testOwnerToken}, false, -1},
		{[]string{"Bearer  " + testOwnerToken}, false, -1},
		{[]string{"Bearer"}, false, -1},
		{[]string{testOwnerToken}, false, -1},
		{nil, false, -1},
	}
	for i, tc := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		for _, h := range tc.headers {
			r.Header.Add("Authorization", h)
		}
		if p := sec.identify(r); p.owner != tc.owner || p.worker != tc.worker {
			t.Errorf("case %d: %+v", i, p)
		}
	}
}

func TestDisconnectKeepsLeaseUntilExpiry(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	w.c.Close()
	<-w.closed
	if j := tg.job(job.ID); j.Status != "leased" {
		t.Fatalf("after disconnect %+v", j)
	}
	w2 := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	// The reconnected lane has a new generation: the old attempt is not its.
	wantReject(t, w2.heartbeat(l1), wire.RejectStale)
	tg.clock.Advance(31 * time.Second)
	tg.waitJob(job.ID, "retry_wait")
	tg.clock.Advance(time.Second)
	if l2 := w2.lease(); l2.JobID != job.ID || l2.Ordinal != 2 {
		t.Fatalf("retry %+v", l2)
	}
}

// Requests the routes cannot serve get the documented JSON errors, not the
// WebSocket library's plain text or ServeMux's redirects (finding F6).
func TestNonCanonicalRequestsGetJSONErrors(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)

	code, body := tg.api("GET", wire.Path, testWorkerToken, nil)
	if code != http.StatusBadRequest || string(body) != `{"error":{"code":"not_websocket","message":"this route takes a WebSocket upgrade (version 13)"}}`+"\n" {
		t.Fatalf("plain GET of the worker endpoint: %d %s", code, body)
	}
	for _, p := range []string{"/v1//jobs", "/v1/./jobs", "/v1/jobs/../../readyz", "/debug/../readyz"} {
		code, body := tg.api("GET", p, testOwnerToken, nil)
		if code != http.StatusNotFound || string(body) != `{"error":{"code":"not_found","message":"no such route"}}`+"\n" {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	// Canonical paths, with and without a trailing slash, still route.
	if code, _ := tg.api("GET", "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz: %d", code)
	}
	if code, _ := tg.api("GET", "/debug/", "", nil); code != http.StatusOK {
		t.Fatalf("/debug/: %d", code)
	}
	if _, err := dialWorker(t, tg.addr, testWorkerToken); err != nil {
		t.Fatalf("a real upgrade still works: %v", err)
	}
}

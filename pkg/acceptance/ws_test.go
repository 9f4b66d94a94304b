package acceptance

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func twoWorkers() gateOpts {
	return gateOpts{workers: []gateWorker{{id: "worker-1", concurrency: 1}, {id: "worker-2", concurrency: 1}}}
}

func TestWorkerEndpointAuthentication(t *testing.T) {
	t.Parallel()
	g := newGate(t, twoWorkers())
	wtok := g.workers[0].token
	for name, auth := range map[string][]string{
		"missing":     nil,
		"wrong":       {"Bearer nope"},
		"owner":       {"Bearer " + g.owner},
		"no scheme":   {wtok},
		"duplicate":   {"Bearer " + wtok, "Bearer " + wtok},
		"two workers": {"Bearer " + wtok, "Bearer " + g.workers[1].token},
	} {
		ws, resp := dialRaw(t, g.addr, auth...)
		if ws != nil {
			t.Fatalf("%s: upgraded", name)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: status %d", name, resp.StatusCode)
		}
		assertAPIError(t, httpResult{resp.StatusCode, resp.Header, body}, http.StatusUnauthorized, "unauthorized", wtok, g.owner)
	}
	g.assertNoSecrets(t)
}

// TestWorkerEndpointHostileClients sends every kind of protocol violation
// on its own connection: each is closed without a reply (or refused with
// reject invalid, for a hello naming another worker or slot), and the Gate
// keeps serving a well-behaved lane.
func TestWorkerEndpointHostileClients(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{workers: []gateWorker{{id: "worker-1", concurrency: 2}, {id: "worker-2", concurrency: 1}}})
	hello := func(id string, slot int) string {
		b, _ := json.Marshal(helloMsg(id, slot))
		return string(b)
	}
	good := hello("worker-1", 0)
	cases := []struct {
		name   string
		frames []string
		binary bool
		reject bool // expect reject{invalid} without seq, then close
	}{
		{name: "binary hello", frames: []string{good}, binary: true},
		{name: "malformed", frames: []string{`{"type":"hello",`}},
		{name: "not an object", frames: []string{`[]`}},
		{name: "unknown field", frames: []string{strings.Replace(good, `"slot"`, `"zz":1,"slot"`, 1)}},
		{name: "case variant", frames: []string{strings.Replace(good, `"slot"`, `"Slot"`, 1)}},
		{name: "duplicate key", frames: []string{strings.Replace(good, `"slot":0`, `"slot":0,"slot":1`, 1)}},
		{name: "null", frames: []string{strings.Replace(good, `"slot":0`, `"slot":null`, 1)}},
		{name: "trailing", frames: []string{good + "{}"}},
		{name: "bad protocol", frames: []string{strings.Replace(good, "forge-wire/v1", "forge-wire/v2", 1)}},
		{name: "negative slot", frames: []string{hello("worker-1", -1)}},
		{name: "heartbeat first", frames: []string{`{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"a","attempt_id":"b"}}`}},
		{name: "result first", frames: []string{`{"type":"result","seq":1,"result":{"job_id":"a","attempt_id":"b","outcome":"succeeded","output":"x"}}`}},
		{name: "gate message", frames: []string{`{"type":"welcome","welcome":{"lane":"worker-1","generation":"0123456789abcdef0123456789abcdef"}}`}},
		{name: "second hello", frames: []string{good, hello("worker-1", 1)}},
		{name: "oversized", frames: []string{`{"type":"hello","hello":{"protocol":"` + strings.Repeat("a", 1<<20) + `"}}`}},
		{name: "other worker id", frames: []string{hello("worker-2", 0)}, reject: true},
		{name: "slot at concurrency", frames: []string{hello("worker-1", 2)}, reject: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, resp := dialRaw(t, g.addr, "Bearer "+g.workers[0].token)
			if ws == nil {
				t.Fatalf("dial: %d", resp.StatusCode)
			}
			for i, f := range c.frames {
				op := byte(opText)
				if c.binary {
					op = opBinary
				}
				if err := ws.writeFrame(op, []byte(f)); err != nil {
					if c.reject {
						t.Fatalf("write: %v", err)
					}
					return // the Gate already closed the connection (e.g. on an oversized header): the expected outcome
				}
				if c.name == "second hello" && i == 0 {
					if e := ws.recv(t); e.Type != "welcome" {
						t.Fatalf("first hello: %+v", e)
					}
				}
			}
			if c.reject {
				e := ws.recv(t)
				if e.Type != "reject" || e.Reject == nil || e.Reject.Code != "invalid" || e.Seq != 0 {
					t.Fatalf("want reject invalid without seq, got %+v", e)
				}
			}
			ws.expectClosed(t)
		})
	}
	// A well-behaved lane still works end to end.
	w, _ := g.lane(t, 1, 0)
	_ = w
	id := g.submit(t, `{"input":"still alive"}`)
	e := w.recv(t)
	if e.Type != "lease" || e.Lease.JobID != id {
		t.Fatalf("want lease of %s, got %+v", id, e)
	}
	w.sendJSON(t, resultMsg(1, id, e.Lease.AttemptID, "STILL ALIVE"))
	if e := w.recv(t); e.Type != "ack" || e.Seq != 1 {
		t.Fatalf("result: %+v", e)
	}
	if j := g.job(t, id); j.Status != "succeeded" || j.Result == nil || *j.Result != "STILL ALIVE" {
		t.Fatalf("job %+v", j)
	}
	g.assertNoSecrets(t)
}

// TestWorkerEndpointConnectionLimit: a Worker may hold at most
// 2 × concurrency connections; more get 429 and no upgrade; closing one
// frees a place.
func TestWorkerEndpointConnectionLimit(t *testing.T) {
	t.Parallel()
	g := newGate(t, twoWorkers())
	tok := "Bearer " + g.workers[0].token
	a, _ := dialRaw(t, g.addr, tok)
	b, _ := dialRaw(t, g.addr, tok)
	if a == nil || b == nil {
		t.Fatal("first two connections refused")
	}
	for i := 0; i < 5; i++ {
		ws, resp := dialRaw(t, g.addr, tok)
		if ws != nil {
			t.Fatalf("connection %d over the limit was upgraded", i+3)
		}
		body, _ := io.ReadAll(resp.Body)
		assertAPIError(t, httpResult{resp.StatusCode, resp.Header, body}, http.StatusTooManyRequests, "too_many_connections")
	}
	// The other Worker is unaffected.
	other, _ := g.lane(t, 1, 0)
	_ = other
	// A connection that never says hello is closed by the Gate (bounded
	// hello wait), which frees its place.
	a.expectClosed(t)
	b.expectClosed(t)
	guard := time.Now().Add(60 * time.Second)
	for {
		ws, _ := dialRaw(t, g.addr, tok)
		if ws != nil {
			break
		}
		if time.Now().After(guard) {
			t.Fatal("places were never freed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkerEndpointSlowHello: a client that dribbles its hello one byte at
// a time is cut off by the hello bound; the Gate keeps serving.
func TestWorkerEndpointSlowHello(t *testing.T) {
	t.Parallel()
	g := newGate(t, twoWorkers())
	ws, _ := dialRaw(t, g.addr, "Bearer "+g.workers[0].token)
	b, _ := json.Marshal(helloMsg("worker-1", 0))
	// A frame header announcing the full length, then one byte.
	frame := []byte{0x81, 0x80 | 126, byte(len(b) >> 8), byte(len(b)), 0, 0, 0, 0}
	ws.c.Write(append(frame, b[0]))
	ws.expectClosed(t)
	w, _ := g.lane(t, 1, 0)
	_ = w
}

// TestWorkerFencing drives one lease through every kind of wrong,
// replayed and late message.
func TestWorkerFencing(t *testing.T) {
	t.Parallel()
	g := newGate(t, twoWorkers())
	w1, _ := g.lane(t, 0, 0)
	w2, _ := g.lane(t, 1, 0)
	id := g.submit(t, `{"input":"fence me"}`)
	// The job goes to one of the two lanes.
	var own, other *rawWS
	var lease envelope
	// Exactly one lane receives the lease; the other receives nothing.
	msgs := make(chan struct {
		w *rawWS
		e envelope
	}, 2)
	for _, w := range []*rawWS{w1, w2} {
		go func(w *rawWS) {
			m, err := w.readMessage(60 * time.Second)
			if err != nil {
				return
			}
			var e envelope
			json.Unmarshal([]byte(m), &e)
			msgs <- struct {
				w *rawWS
				e envelope
			}{w, e}
		}(w)
	}
	first := <-msgs
	own, lease = first.w, first.e
	if own == w1 {
		other = w2
	} else {
		other = w1
	}
	if lease.Type != "lease" || lease.Lease.JobID != id || lease.Lease.Ordinal != 1 {
		t.Fatalf("lease: %+v", lease)
	}
	att := lease.Lease.AttemptID
	expect := func(w *rawWS, seq int, typ, code string) {
		t.Helper()
		var e envelope
		if w == other {
			// the reader goroutine of the other lane consumed its first
			// message: read from the channel first.
			e = (<-msgs).e
		} else {
			e = w.recv(t)
		}
		if e.Type != typ || int(e.Seq) != seq || (code != "" && (e.Reject == nil || e.Reject.Code != code)) {
			t.Fatalf("seq %d: want %s %s, got %+v", seq, typ, code, e)
		}
	}
	// Another Worker's lane cannot publish, heartbeat or bind evidence.
	other.sendJSON(t, resultMsg(7, id, att, "STOLEN"))
	expect(other, 7, "reject", "stale")
	// (the other lane's reader goroutine is gone; read directly now)
	otherRecv := func(seq int, code string) {
		t.Helper()
		e := other.recv(t)
		if e.Type != "reject" || int(e.Seq) != seq || e.Reject.Code != code {
			t.Fatalf("other lane seq %d: want reject %s, got %+v", seq, code, e)
		}
	}
	other.sendJSON(t, heartbeatMsg(8, id, att))
	otherRecv(8, "stale")
	// Wrong job for the right attempt, unknown attempt.
	own.sendJSON(t, resultMsg(1, strings.Repeat("a", 32), att, "X"))
	expect(own, 1, "reject", "stale")
	own.sendJSON(t, resultMsg(2, id, strings.Repeat("b", 32), "X"))
	expect(own, 2, "reject", "stale")
	// Failure codes outside the table, the wrong disposition, Gate-only codes.
	for i, c := range [][2]string{{"retryable", "no_such_code"}, {"terminal", "plugin_failed"}, {"retryable", "invalid_task"},
		{"terminal", "max_attempts_exceeded"}, {"retryable", "lease_expired"}} {
		own.sendJSON(t, failedMsg(10+i, id, att, c[0], c[1]))
		expect(own, 10+i, "reject", "invalid")
	}
	// Coding result for a text attempt.
	own.sendJSON(t, map[string]any{"type": "result", "seq": 20, "result": map[string]any{
		"job_id": id, "attempt_id": att, "outcome": "succeeded", "candidate_sha": strings.Repeat("c", 40)}})
	expect(own, 20, "reject", "invalid")
	if j := g.job(t, id); j.Status != "leased" {
		t.Fatalf("rejected results changed the job: %+v", j)
	}
	own.sendJSON(t, heartbeatMsg(21, id, att))
	expect(own, 21, "ack", "")
	own.sendJSON(t, resultMsg(22, id, att, "FENCE ME"))
	expect(own, 22, "ack", "")
	own.sendJSON(t, resultMsg(23, id, att, "FENCE ME"))
	expect(own, 23, "ack", "") // identical replay
	own.sendJSON(t, resultMsg(24, id, att, "SOMETHING ELSE"))
	expect(own, 24, "reject", "conflict")
	own.sendJSON(t, failedMsg(25, id, att, "retryable", "plugin_failed"))
	expect(own, 25, "reject", "conflict")
	own.sendJSON(t, heartbeatMsg(26, id, att))
	expect(own, 26, "reject", "")
	ev := map[string]any{"type": "evidence", "seq": 27, "evidence": map[string]any{"job_id": id, "attempt_id": att, "batch": 1,
		"records": []any{map[string]any{"phase": "plugin"}}}}
	own.sendJSON(t, ev)
	expect(own, 27, "reject", "")
	a := g.aggregate(t, id)
	if a.Job.Status != "succeeded" || *a.Job.Result != "FENCE ME" || len(a.Attempts) != 1 || len(a.Attempts[0].Evidence) != 0 {
		t.Fatalf("aggregate after replays: %+v", a)
	}
	// The lanes are still open and usable: the next job is leased.
	id2 := g.submit(t, `{"input":"next"}`)
	g.waitJob(t, id2, "leased", func(j apiJob) bool { return j.Status == "leased" })
}

// TestWorkerTakeover: a second connection for the same lane takes it over;
// the old socket is closed and the old attempt, once started (here by a
// heartbeat), can only expire and be retried, never be published by the
// newcomer.
func TestWorkerTakeover(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{leaseTTL: "1s", retryBase: "50ms"})
	old, _ := g.lane(t, 0, 0)
	id := g.submit(t, `{"input":"take over"}`)
	e := old.recv(t)
	if e.Type != "lease" {
		t.Fatalf("lease: %+v", e)
	}
	att := e.Lease.AttemptID
	old.sendJSON(t, heartbeatMsg(1, id, att))
	if a := old.recv(t); a.Type != "ack" {
		t.Fatalf("heartbeat: %+v", a)
	}
	nw, gen := g.lane(t, 0, 0)
	if gen == "" {
		t.Fatal("no generation")
	}
	old.expectClosed(t)
	// The newcomer cannot publish the old generation's attempt.
	nw.sendJSON(t, resultMsg(1, id, att, "TAKE OVER"))
	r := nw.recv(t)
	if r.Type != "reject" || r.Reject.Code != "stale" {
		t.Fatalf("newcomer published the old attempt: %+v", r)
	}
	// The attempt expires and is retried, to the newcomer.
	for {
		e := nw.recv(t)
		if e.Type == "lease" {
			if e.Lease.JobID != id || e.Lease.Ordinal != 2 {
				t.Fatalf("retry lease: %+v", e)
			}
			nw.sendJSON(t, resultMsg(2, id, e.Lease.AttemptID, "TAKE OVER"))
			if a := nw.recv(t); a.Type != "ack" {
				t.Fatalf("result: %+v", a)
			}
			break
		}
	}
	a := g.aggregate(t, id)
	if a.Job.Status != "succeeded" || len(a.Attempts) != 2 || a.Attempts[0].Status != "expired" || a.Attempts[0].FailureCode != "lease_expired" {
		t.Fatalf("aggregate: %+v", a)
	}
}

// TestWorkerTakeoverReturnsUnstartedLease: a lease the old connection never
// started (no heartbeat, evidence or activity) goes back to the queue at
// takeover, as goodbye would return it: the newcomer receives the job at
// once, under a new attempt id with the same ordinal, without waiting for
// the old lease to expire.
func TestWorkerTakeoverReturnsUnstartedLease(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{leaseTTL: "1h", retryBase: "1h"})
	old, _ := g.lane(t, 0, 0)
	id := g.submit(t, `{"input":"never started"}`)
	e := old.recv(t)
	if e.Type != "lease" {
		t.Fatalf("lease: %+v", e)
	}
	nw, _ := g.lane(t, 0, 0)
	old.expectClosed(t)
	r := nw.recv(t)
	if r.Type != "lease" || r.Lease.JobID != id || r.Lease.AttemptID == e.Lease.AttemptID || r.Lease.Ordinal != e.Lease.Ordinal {
		t.Fatalf("newcomer lease: %+v", r)
	}
	nw.sendJSON(t, resultMsg(1, id, r.Lease.AttemptID, "NEVER STARTED"))
	if a := nw.recv(t); a.Type != "ack" {
		t.Fatalf("result: %+v", a)
	}
	if a := g.aggregate(t, id); a.Job.Status != "succeeded" {
		t.Fatalf("aggregate: %+v", a)
	}
}

// TestWorkerActivityIsNeverAnswered: activity messages for attempts the
// lane does not hold are dropped silently (no reply, connection kept); a
// malformed activity message is a protocol violation.
func TestWorkerActivityIsNeverAnswered(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	w, _ := g.lane(t, 0, 0)
	for i := 0; i < 500; i++ {
		w.sendText(t, `{"type":"activity","activity":{"job_id":"`+strings.Repeat("a", 32)+`","attempt_id":"`+strings.Repeat("b", 32)+`","version":"live_activity/v1","stage":"editing"}}`)
	}
	w.sendJSON(t, heartbeatMsg(9, strings.Repeat("a", 32), strings.Repeat("b", 32)))
	if e := w.recv(t); e.Type != "reject" || e.Seq != 9 || e.Reject.Code != "stale" {
		t.Fatalf("first answer after activity: %+v", e)
	}
	w.sendText(t, `{"type":"activity","activity":{"job_id":"a","attempt_id":"b","version":"live_activity/v1","stage":"dancing"}}`)
	w.expectClosed(t)
}

// TestWorkerMessagesAfterTheDeadline: with the sweep far away, a heartbeat
// or result that arrives after the lease deadline is refused (expired or
// stale) and the job is not completed by it.
func TestWorkerMessagesAfterTheDeadline(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{leaseTTL: "300ms", recovery: "1h"})
	w, _ := g.lane(t, 0, 0)
	id := g.submit(t, `{"input":"late"}`)
	e := w.recv(t)
	if e.Type != "lease" {
		t.Fatalf("lease: %+v", e)
	}
	// Wait until the deadline has passed on the shared clock (ordering,
	// not a timing assertion).
	time.Sleep(time.Until(e.Lease.DeadlineAt) + 50*time.Millisecond)
	w.sendJSON(t, heartbeatMsg(1, id, e.Lease.AttemptID))
	if r := w.recv(t); r.Type != "reject" || (r.Reject.Code != "expired" && r.Reject.Code != "stale") {
		t.Fatalf("late heartbeat: %+v", r)
	}
	w.sendJSON(t, resultMsg(2, id, e.Lease.AttemptID, "LATE"))
	if r := w.recv(t); r.Type != "reject" || (r.Reject.Code != "expired" && r.Reject.Code != "stale") {
		t.Fatalf("late result: %+v", r)
	}
	if j := g.job(t, id); j.Status == "succeeded" || j.Result != nil {
		t.Fatalf("a late result completed the job: %+v", j)
	}
}

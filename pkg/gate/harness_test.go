package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// waitLimit bounds every wait for a message so a broken Gate fails the
// test instead of hanging it; it is a safety net, not a timing assertion.
const waitLimit = 20 * time.Second

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testConfig is the example config with test-friendly cadences: a fast
// sweep, and a lease poll so slow that only push dispatch can deliver.
func testConfig(t testing.TB, mutate func(m map[string]any)) (*Config, *Secrets) {
	t.Helper()
	data := edit(t, func(m map[string]any) {
		m["recovery_interval"] = "10ms"
		m["lease_poll_interval"] = "1h"
		m["lifecycle"] = map[string]any{"lease_ttl": "30s", "retry_base": "1s", "max_attempts": 3}
		worker0(m)["concurrency"] = 4
		m["default_execution"].(map[string]any)["plugin_id"] = "reference"
		if mutate != nil {
			mutate(m)
		}
	})
	env := defaultEnv()
	env["W2"] = "worker-two-token-0001"
	env["FORGE_GITHUB_APP_ID"] = "123456"
	cfg, sec, err := LoadConfig(bytes.NewReader(data), testEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, sec
}

// testGate is a Gate on a real SQLite file, serving on a real loopback
// listener.
type testGate struct {
	t      testing.TB
	cfg    *Config
	sec    *Secrets
	db     string
	clock  *clock
	st     *store.Store
	g      *Gate
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func startGate(t testing.TB, cfg *Config, sec *Secrets, db string, clk *clock) *testGate {
	t.Helper()
	if clk == nil {
		clk = newClock()
	}
	tg := startGateAt(t, cfg, sec, db, clk.Now)
	tg.clock = clk
	return tg
}

// startGateClock starts a Gate on a fresh database with the given clock.
func startGateClock(t testing.TB, cfg *Config, sec *Secrets, now func() time.Time) *testGate {
	return startGateAt(t, cfg, sec, "", now)
}

func startGateAt(t testing.TB, cfg *Config, sec *Secrets, db string, now func() time.Time) *testGate {
	t.Helper()
	return startGateLogging(t, cfg, sec, db, now, io.Discard)
}

// startGateLogging is startGateAt with the Gate's JSON log written to logw.
func startGateLogging(t testing.TB, cfg *Config, sec *Secrets, db string, now func() time.Time, logw io.Writer) *testGate {
	t.Helper()
	return startGateSetup(t, cfg, sec, db, now, logw, nil)
}

// startGateSetup is startGateLogging with setup applied to the Gate
// before it serves (nil: none).
func startGateSetup(t testing.TB, cfg *Config, sec *Secrets, db string, now func() time.Time, logw io.Writer, setup func(*Gate)) *testGate {
	t.Helper()
	if db == "" {
		db = filepath.Join(t.TempDir(), "state", "forge.db")
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return startGateOn(t, cfg, sec, db, st, now, logw, setup)
}

// startGateOn is startGateSetup on a store the caller opened on db (the
// Gate's stop closes it).
func startGateOn(t testing.TB, cfg *Config, sec *Secrets, db string, st *store.Store, now func() time.Time, logw io.Writer, setup func(*Gate)) *testGate {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(logw, nil))
	g, err := New(cfg, sec, st, log, now)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(g)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tg := &testGate{t: t, cfg: cfg, sec: sec, db: db, st: st, g: g, addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { tg.done <- g.Serve(ctx, ln) }()
	t.Cleanup(tg.stop)
	tg.waitReady()
	return tg
}

func (tg *testGate) waitReady() {
	tg.t.Helper()
	select {
	case <-tg.g.readied:
	case err := <-tg.done:
		tg.t.Fatalf("gate stopped before ready: %v", err)
	case <-time.After(waitLimit):
		tg.t.Fatal("gate never became ready")
	}
}

// stop shuts the Gate down and closes its store; safe to call twice.
func (tg *testGate) stop() {
	if tg.cancel == nil {
		return
	}
	tg.cancel()
	tg.cancel = nil
	select {
	case err := <-tg.done:
		if err != nil {
			tg.t.Errorf("gate stopped with %v", err)
		}
	case <-time.After(waitLimit):
		tg.t.Error("gate did not stop")
	}
	tg.st.Close()
}

// api performs an owner API call and returns status and body.
func (tg *testGate) api(method, path, token string, body []byte) (int, []byte) {
	tg.t.Helper()
	req, err := http.NewRequest(method, "http://"+tg.addr+path, bytes.NewReader(body))
	if err != nil {
		tg.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tg.t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (tg *testGate) submit(task string) store.Job {
	tg.t.Helper()
	code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(task))
	if code != http.StatusCreated {
		tg.t.Fatalf("submit: %d %s", code, body)
	}
	var j store.Job
	if err := json.Unmarshal(body, &j); err != nil {
		tg.t.Fatal(err)
	}
	return j
}

type apiJob struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	FailureCode  string `json:"failure_code"`
	Result       *string
	AttemptCount int    `json:"attempt_count"`
	RetryAt      string `json:"retry_at"`
}

func (tg *testGate) job(id string) apiJob {
	tg.t.Helper()
	code, body := tg.api("GET", "/v1/jobs/"+id, testOwnerToken, nil)
	if code != http.StatusOK {
		tg.t.Fatalf("job: %d %s", code, body)
	}
	var j apiJob
	if err := json.Unmarshal(body, &j); err != nil {
		tg.t.Fatal(err)
	}
	return j
}

// rawWorker speaks forge-wire/v1 directly over a real WebSocket.
type rawWorker struct {
	t       testing.TB
	c       *wire.Conn
	welcome wire.Welcome
	seq     uint64
	replies chan wire.Envelope // ack and reject
	pushes  chan wire.Envelope // lease and cancel
	closed  chan struct{}      // the Gate closed the connection
}

func dialWorker(t testing.TB, addr, token string) (*wire.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return wire.Dial(ctx, "ws://"+addr, token)
}

// connect dials, says hello, and waits for welcome.
func connect(t testing.TB, addr, token, workerID string, slot int, plugins, repos []string) *rawWorker {
	t.Helper()
	return connectHello(t, addr, token, &wire.Hello{Protocol: wire.Protocol, WorkerID: workerID, Slot: slot, Plugins: plugins, Repositories: repos})
}

// connectHello is connect with the lane's hello as given.
func connectHello(t testing.TB, addr, token string, hello *wire.Hello) *rawWorker {
	t.Helper()
	c, err := dialWorker(t, addr, token)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	w := &rawWorker{t: t, c: c, replies: make(chan wire.Envelope, 64), pushes: make(chan wire.Envelope, 64), closed: make(chan struct{})}
	t.Cleanup(func() { c.Close() })
	if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Receive()
	if err != nil || first.Welcome == nil {
		t.Fatalf("no welcome: %+v %v", first, err)
	}
	w.welcome = *first.Welcome
	go w.read()
	return w
}

func (w *rawWorker) read() {
	defer close(w.closed)
	for {
		e, err := w.c.Receive()
		if err != nil {
			return
		}
		switch e.Type {
		case wire.TypeAck, wire.TypeReject:
			w.replies <- e
		default:
			w.pushes <- e
		}
	}
}

// push waits for the next lease or cancel.
func (w *rawWorker) push() wire.Envelope {
	w.t.Helper()
	select {
	case e := <-w.pushes:
		return e
	case <-w.closed:
		w.t.Fatal("connection closed while waiting for a push")
	case <-time.After(waitLimit):
		w.t.Fatal("no push from the gate")
	}
	return wire.Envelope{}
}

func (w *rawWorker) lease() *wire.Lease {
	w.t.Helper()
	e := w.push()
	if e.Lease == nil {
		w.t.Fatalf("expected a lease, got %s", e.Type)
	}
	return e.Lease
}

// request sends one request and returns the Gate's reply for it.
func (w *rawWorker) request(e wire.Envelope) wire.Envelope {
	w.t.Helper()
	w.seq++
	e.Seq = w.seq
	if err := w.c.Send(e); err != nil {
		w.t.Fatalf("send: %v", err)
	}
	select {
	case r := <-w.replies:
		if r.Seq != e.Seq {
			w.t.Fatalf("reply seq %d for request %d", r.Seq, e.Seq)
		}
		return r
	case <-w.closed:
		// The reader queues a reply before it sees the close.
		select {
		case r := <-w.replies:
			if r.Seq != e.Seq {
				w.t.Fatalf("reply seq %d for request %d", r.Seq, e.Seq)
			}
			return r
		default:
		}
		w.t.Fatal("connection closed while waiting for a reply")
	case <-time.After(waitLimit):
		w.t.Fatal("no reply from the gate")
	}
	return wire.Envelope{}
}

func (w *rawWorker) heartbeat(l *wire.Lease) wire.Envelope {
	return w.request(wire.Envelope{Type: wire.TypeHeartbeat, Heartbeat: &wire.Heartbeat{JobID: l.JobID, AttemptID: l.AttemptID}})
}

func (w *rawWorker) textResult(l *wire.Lease, out string) wire.Envelope {
	return w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID, Outcome: wire.OutcomeSucceeded, Output: &out}})
}

func (w *rawWorker) failResult(l *wire.Lease, code string) wire.Envelope {
	d, _ := wire.DispositionOf(code)
	return w.request(wire.Envelope{Type: wire.TypeResult, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID, Outcome: wire.OutcomeFailed, Disposition: d, FailureCode: code}})
}

func wantAck(t testing.TB, e wire.Envelope) {
	t.Helper()
	if e.Ack == nil {
		t.Fatalf("want ack, got %s %+v", e.Type, e.Reject)
	}
}

func wantReject(t testing.TB, e wire.Envelope, code wire.RejectCode) {
	t.Helper()
	if e.Reject == nil || e.Reject.Code != code {
		t.Fatalf("want reject %s, got %s %+v", code, e.Type, e.Reject)
	}
}

// waitJob polls the owner API until the job reaches status; the Gate moves
// jobs asynchronously (sweeps), so the test observes rather than sleeps.
func (tg *testGate) waitJob(id, status string) apiJob {
	tg.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		j := tg.job(id)
		if j.Status == status {
			return j
		}
		if time.Now().After(deadline) {
			tg.t.Fatalf("job %s stayed %s, want %s", id, j.Status, status)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func plugins() []string { return []string{"reference", "codex"} }

func noRepos() []string { return []string{} }

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func discardLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

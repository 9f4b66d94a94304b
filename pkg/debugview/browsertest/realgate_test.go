package browsertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/debugview"
	"github.com/0k-lab/agent-forge/pkg/debugview/readertest"
	"github.com/0k-lab/agent-forge/pkg/gate"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
	"github.com/0k-lab/agent-forge/pkg/worker"
)

const (
	gateWorkerToken = "worker-token-5a1e-BROWSER"
	realWorkerToken = "worker-token-77c0-REAL"
	// waitLimit is a safety net against a hung Gate, not a timing assertion.
	waitLimit = 20 * time.Second
)

// realGate is pkg/gate on a real SQLite file, serving its own listener,
// plus the store handle the viewer reads.
type realGate struct {
	addr string
	g    *gate.Gate
	st   *store.Store
}

func startGate(t *testing.T) *realGate {
	t.Helper()
	db := filepath.Join(t.TempDir(), "state", "forge.db")
	exec := `{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m",` +
		`"cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}`
	cfgJSON := `{"version":1,"listen":"127.0.0.1:0","database":"` + db + `","owner_token_env":"OWNER","recovery_interval":"1s",` +
		`"lease_poll_interval":"1h","default_pool":"text","lifecycle":{"lease_ttl":"5m","retry_base":"1s","max_attempts":3},` +
		`"default_execution":` + exec + `,"workers":[{"id":"worker-1","pool":"text","token_env":"WORKER","concurrency":1},` +
		`{"id":"worker-2","pool":"text","token_env":"WORKER2","concurrency":1}],"repositories":[]}`
	env := map[string]string{"OWNER": browserToken, "WORKER": gateWorkerToken, "WORKER2": realWorkerToken}
	cfg, sec, err := gate.LoadConfig(strings.NewReader(cfgJSON), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	g, err := gate.New(cfg, sec, st, slog.New(slog.NewJSONHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("gate stopped with %v", err)
				}
			case <-time.After(waitLimit):
				t.Error("gate did not stop")
			}
		}
		st.Close()
	})
	rg := &realGate{addr: ln.Addr().String(), g: g, st: st}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(waitLimit)
	for {
		if code, _ := rg.api(t, http.MethodGet, "/readyz", nil); code == http.StatusOK {
			return rg
		}
		select {
		case <-tick.C:
		case err := <-done:
			stopped = true
			t.Fatalf("gate stopped before ready: %v", err)
		case <-limit:
			t.Fatal("gate never became ready")
		}
	}
}

// api calls the Gate's owner API directly (not through the browser's server).
func (rg *realGate) api(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+rg.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+browserToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

func (rg *realGate) submit(t *testing.T, input string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input})
	code, resp := rg.api(t, http.MethodPost, "/v1/jobs", body)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	var j struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp, &j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// rawLane is one Worker lane speaking forge-wire/v1 over a real WebSocket.
type rawLane struct {
	t       *testing.T
	c       *wire.Conn
	seq     uint64
	welcome wire.Welcome
}

func connectRawLane(t *testing.T, addr string) *rawLane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := wire.Dial(ctx, "ws://"+addr, gateWorkerToken)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	hello := &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Plugins: []string{"reference"}, Repositories: []string{},
		ActivityVersions: activity.Offer(), UsageVersions: []string{wire.UsageV1}}
	if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		t.Fatal(err)
	}
	e, err := c.Receive()
	if err != nil || e.Welcome == nil {
		t.Fatalf("no welcome: %v", err)
	}
	return &rawLane{t: t, c: c, welcome: *e.Welcome}
}

func (l *rawLane) lease() *wire.Lease {
	l.t.Helper()
	l.c.SetReadDeadline(time.Now().Add(waitLimit))
	e, err := l.c.Receive()
	if err != nil || e.Lease == nil {
		l.t.Fatalf("expected a lease: %v", err)
	}
	return e.Lease
}

func (l *rawLane) result(r *wire.Result) {
	l.t.Helper()
	l.seq++
	if err := l.c.Send(wire.Envelope{Type: wire.TypeResult, Seq: l.seq, Result: r}); err != nil {
		l.t.Fatal(err)
	}
	l.c.SetReadDeadline(time.Now().Add(waitLimit))
	if e, err := l.c.Receive(); err != nil || e.Ack == nil {
		l.t.Fatalf("result not acknowledged: %v", err)
	}
}

// stage reports one live-activity stage of the lane's attempt to the Gate,
// then heartbeats: the Gate handles one connection's messages in order, so
// once the heartbeat is acknowledged the stage has been recorded.
func (l *rawLane) stage(ls *wire.Lease, s activity.Stage) {
	l.t.Helper()
	p := &wire.Activity{JobID: ls.JobID, AttemptID: ls.AttemptID, Version: ls.ActivityVersion, Stage: s}
	if err := l.c.Send(wire.Envelope{Type: wire.TypeActivity, Activity: p}); err != nil {
		l.t.Fatal(err)
	}
	l.seq++
	hb := &wire.Heartbeat{JobID: ls.JobID, AttemptID: ls.AttemptID}
	if err := l.c.Send(wire.Envelope{Type: wire.TypeHeartbeat, Seq: l.seq, Heartbeat: hb}); err != nil {
		l.t.Fatal(err)
	}
	l.c.SetReadDeadline(time.Now().Add(waitLimit))
	if e, err := l.c.Receive(); err != nil || e.Ack == nil || e.Seq != l.seq {
		l.t.Fatalf("heartbeat not acknowledged: %v", err)
	}
}

// startRealWorker runs pkg/worker in-process as worker-2 with the
// repository's dependency-free Python example plugin, and returns a channel
// that receives the id of every job whose result the Gate acknowledged.
func startRealWorker(t *testing.T, gateAddr string) <-chan string {
	t.Helper()
	plugin, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "forge-plugin-v1.py"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(plugin)
	if err != nil {
		t.Fatalf("example plugin: %v", err)
	}
	sum := sha256.Sum256(data)
	dir := t.TempDir()
	cfgJSON, _ := json.Marshal(map[string]any{
		"version": 1, "gate_url": "ws://" + gateAddr, "id": "worker-2", "token_env": "WORKER2", "heartbeat_interval": "1s",
		"concurrency": 1, "repository_roots": []string{}, "worktree_root": filepath.Join(dir, "worktrees"),
		"runtime_root": filepath.Join(dir, "runtime"), "repositories": []any{},
		"plugins":               []any{map[string]any{"id": "reference", "argv": []string{plugin}, "sha256": hex.EncodeToString(sum[:])}},
		"environment_allowlist": []string{"PATH"},
		"ceilings": map[string]any{"plugin_timeout": "15m", "check_timeout": "10m", "git_timeout": "1m", "cleanup_timeout": "10s",
			"plugin_output_bytes": 1048576, "check_output_bytes": 2048, "git_output_bytes": 1048576},
	})
	cfg, err := worker.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatalf("worker config: %v", err)
	}
	token, err := worker.CheckHost(cfg, func(k string) string {
		if k == "WORKER2" {
			return realWorkerToken
		}
		return ""
	})
	if err != nil {
		t.Fatalf("worker host: %v", err)
	}
	// The plugin runs in the Worker's sandbox, which a reaper (this test
	// binary, see TestMain) applies before exec, as in forge-worker.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reapers := supervise.NewReaperPool(self)
	t.Cleanup(reapers.Close)
	reported := make(chan string, 16)
	w := worker.New(worker.Options{
		Config:    cfg,
		Token:     token,
		Executors: map[wire.Kind]worker.Executor{wire.KindText: worker.NewTextExecutor(cfg, os.LookupEnv, reapers)},
		Observe: func(e worker.Event) {
			if e.Kind == worker.EventReported {
				select {
				case reported <- e.JobID:
				default:
				}
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Error("worker did not stop")
		}
	})
	return reported
}

// expected builds the Dataset the viewer's Reader must serve, from the
// store's owner-API reads (not its debug reads); ids are in submission
// order.
func expected(t *testing.T, st *store.Store, ids []string) readertest.Dataset {
	t.Helper()
	ctx := context.Background()
	d := readertest.Dataset{Attempts: map[string][]debugview.Attempt{}, Events: map[string][]debugview.Event{}}
	for _, id := range ids {
		agg, err := st.Aggregate(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		j := agg.Job
		job := debugview.Job{ID: j.ID, Kind: j.Kind, Status: j.Status, FailureCode: j.FailureCode, RepositoryID: j.RepositoryID,
			AttemptCount: j.AttemptCount, CreatedAt: j.CreatedAt.Time, UpdatedAt: j.UpdatedAt.Time}
		if j.RetryAt != nil {
			job.RetryAt = j.RetryAt.Time
		}
		d.Jobs = append(d.Jobs, job)
		d.Attempts[id] = []debugview.Attempt{}
		for _, a := range agg.Attempts {
			at := debugview.Attempt{ID: a.ID, Ordinal: a.Ordinal, Status: a.Status, Lane: a.WorkerID, LeasedAt: a.LeasedAt.Time,
				DeadlineAt: a.DeadlineAt.Time, Disposition: a.Disposition, FailureCode: a.FailureCode}
			if a.CompletedAt != nil {
				at.CompletedAt = a.CompletedAt.Time
			}
			if u := a.Usage; u != nil {
				at.Usage = &debugview.Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
			}
			d.Attempts[id] = append(d.Attempts[id], at)
		}
		for _, e := range agg.Events {
			d.Events[id] = append(d.Events[id], debugview.Event{Seq: int64(e.Seq), Type: e.Type, At: e.At.Time, Attempt: e.Attempt, Code: e.Code})
		}
	}
	// ids are in submission order; the viewer lists newest first.
	slices.Reverse(d.Jobs)
	// Lanes: the listing itself is the reference; Check then proves that
	// paging through it is consistent. Content is asserted by the caller.
	lanes, err := st.DebugLanes(ctx, "", store.MaxDebugLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes {
		d.Lanes = append(d.Lanes, debugview.Lane{Lane: l.Lane, WorkerID: l.WorkerID, Pool: "text", Connected: l.Connected,
			ConnectedAt: l.ConnectedAt, DisconnectedAt: l.DisconnectedAt, JobID: l.JobID, AttemptID: l.AttemptID})
	}
	return d
}

// TestViewerOnRealGate runs a real Gate (real SQLite file) with a raw
// WebSocket lane and a real in-process Worker, checks the store-backed
// Reader against the Reader contract, and drives the Gate's own viewer in
// Chromium.
func TestViewerOnRealGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rg := startGate(t)

	secrets := []string{"SECRET-INPUT-ALPHA", "SECRET-INPUT-BRAVO", "SECRET-INPUT-CHARLIE", "SECRET-OUTPUT-ALPHA"}
	ids := []string{rg.submit(t, secrets[0]), rg.submit(t, secrets[1]), rg.submit(t, secrets[2])}
	lane := connectRawLane(t, rg.addr)
	first := lane.lease()
	lane.result(&wire.Result{JobID: first.JobID, AttemptID: first.AttemptID, Outcome: wire.OutcomeSucceeded, Output: &secrets[3],
		Usage: &wire.Usage{}})
	second := lane.lease()
	lane.result(&wire.Result{JobID: second.JobID, AttemptID: second.AttemptID, Outcome: wire.OutcomeFailed,
		Disposition: wire.DispositionTerminal, FailureCode: wire.FailureInvalidTask,
		Usage: &wire.Usage{Requests: 3, InputTokens: 1200, OutputTokens: 340, CachedTokens: 900}})
	third := lane.lease() // stays leased: the lane's current job

	// A real Worker runs a fourth job through a real plugin process.
	reported := startRealWorker(t, rg.addr)
	fourth := rg.submit(t, "hello from a real worker")
	select {
	case id := <-reported:
		if id != fourth {
			t.Fatalf("worker reported job %s, want %s", id, fourth)
		}
	case <-time.After(waitLimit):
		t.Fatal("the real Worker did not finish the job")
	}
	ids = append(ids, fourth)
	secrets = append(secrets, "HELLO FROM A REAL WORKER")

	reader := debugview.FromStore(rg.st, func(string) string { return "text" })
	want := expected(t, rg.st, ids)
	readertest.Check(t, reader, want)
	if len(want.Lanes) != 2 || !want.Lanes[0].Connected || want.Lanes[0].JobID != third.JobID || want.Lanes[0].AttemptID != third.AttemptID ||
		want.Lanes[1].Lane != "worker-2" || !want.Lanes[1].Connected || want.Lanes[1].JobID != "" {
		t.Fatalf("lanes %+v", want.Lanes)
	}
	if done := want.Jobs[0]; done.ID != fourth || done.Status != "succeeded" {
		t.Fatalf("newest job %+v", done)
	}

	// The raw lane offered live_activity/v1, so its lease selected it; its
	// current attempt reports a live stage to the Gate, which keeps it in
	// memory bound to the lane's connection.
	if third.ActivityVersion != activity.Version {
		t.Fatalf("lease selects activity %q", third.ActivityVersion)
	}
	lane.stage(third, activity.StageAnalyzing)

	// The browser talks to the Gate's own routes only (pkg/gate mounts the
	// viewer with its owner check and its live activity).
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(rg.g.Handler()))
	defer srv.Close()

	// Owner-only on the Gate: both Worker tokens are refused.
	for _, token := range []string{gateWorkerToken, realWorkerToken, browserToken} {
		for _, path := range []string{"/v1/debug/jobs", "/v1/debug/workers", "/v1/debug/jobs/" + first.JobID} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+rg.addr+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if want := map[bool]int{true: http.StatusOK, false: http.StatusUnauthorized}[token == browserToken]; resp.StatusCode != want {
				t.Fatalf("%s with a %s token: %d", path, map[bool]string{true: "owner", false: "worker"}[token == browserToken], resp.StatusCode)
			}
		}
	}

	// The JSON itself never carries task inputs or results.
	for _, path := range append([]string{"/v1/debug/jobs", "/v1/debug/workers"}, "/v1/debug/jobs/"+first.JobID, "/v1/debug/jobs/"+second.JobID) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+browserToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		for _, s := range secrets {
			if bytes.Contains(body, []byte(s)) {
				t.Fatalf("%s leaks task content", path)
			}
		}
	}

	b, p := openPage(ctx, t, srv.URL+"/debug/")
	defer b.Close()
	p.login(ctx, browserToken)
	p.waitFor(ctx, `document.querySelectorAll('#jobs-body tr').length === 4 && document.querySelectorAll('#lanes-body tr').length === 2`)
	var field string
	p.eval(ctx, `document.getElementById('token').value`, &field)
	if field != "" {
		t.Fatal("the token field was not cleared")
	}
	if lanes := p.text(ctx, `document.getElementById('lanes-body')`); !strings.Contains(lanes, "worker-1") || !strings.Contains(lanes, "worker-2") ||
		!strings.Contains(lanes, "connected") || strings.Contains(lanes, "disconnected") || !strings.Contains(lanes, third.JobID) {
		t.Fatalf("lanes %q", lanes)
	}

	// Open the failed job: its timeline shows the attempt failing.
	p.eval(ctx, `document.querySelector('#jobs-body tr[data-job-id="`+second.JobID+`"]').click(), true`, nil)
	p.waitFor(ctx, `!document.getElementById('drawer').hidden && document.querySelectorAll('#timeline li').length === 4`)
	timeline := p.text(ctx, `document.getElementById('timeline')`)
	for _, w := range []string{"submitted", "leased  attempt 1", "attempt_failed  attempt 1  (invalid_task)", "Z  failed  attempt 1  (invalid_task)"} {
		if !strings.Contains(timeline, w) {
			t.Fatalf("timeline %q lacks %q", timeline, w)
		}
	}
	if title := p.text(ctx, `document.getElementById('drawer-title')`); title != "Job "+second.JobID {
		t.Fatalf("drawer title %q", title)
	}
	if attempts := p.text(ctx, `document.getElementById('attempts-body')`); !strings.Contains(attempts, "worker-1") || !strings.Contains(attempts, "terminal") ||
		!strings.Contains(attempts, "3 req, 1200 in (900 cached), 340 out") {
		t.Fatalf("attempts %q", attempts)
	}
	if fields := p.text(ctx, `document.getElementById('job-fields')`); !strings.Contains(fields, "Model usage3 req, 1200 in (900 cached), 340 out") {
		t.Fatalf("job fields %q", fields)
	}
	// The real Worker's job: its timeline and lane.
	p.eval(ctx, `document.querySelector('#jobs-body tr[data-job-id="`+fourth+`"]').click(), true`, nil)
	p.waitFor(ctx, `document.getElementById('drawer-title').textContent === 'Job `+fourth+`' && document.querySelectorAll('#timeline li').length === 3`)
	if tl := p.text(ctx, `document.getElementById('timeline')`); !strings.Contains(tl, "Z  succeeded  attempt 1") {
		t.Fatalf("timeline %q", tl)
	}
	if attempts := p.text(ctx, `document.getElementById('attempts-body')`); !strings.Contains(attempts, "worker-2") || !strings.Contains(attempts, "succeeded") {
		t.Fatalf("attempts %q", attempts)
	}
	// The running job shows its live stage; finished jobs show none.
	p.waitFor(ctx, `document.getElementById('live-note').textContent.startsWith('No live activity')`)
	p.eval(ctx, `document.querySelector('#jobs-body tr[data-job-id="`+third.JobID+`"]').click(), true`, nil)
	p.waitFor(ctx, `document.getElementById('drawer-title').textContent === 'Job `+third.JobID+`' && document.querySelectorAll('#live-list li').length === 1`)
	if live := p.text(ctx, `document.getElementById('live-list')`); !strings.Contains(live, "analyzing  attempt 1 on worker-1") {
		t.Fatalf("live activity %q", live)
	}
	body := p.text(ctx, `document.body`)
	for _, s := range append(secrets, browserToken) {
		if strings.Contains(body, s) {
			t.Fatal("the page shows task content or the token")
		}
	}
	p.screenshot(ctx, "debugview-real-gate.png")
	checkRequests(t, b.Events(), rec.all())
}

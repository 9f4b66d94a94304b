package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gate"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

const ownerToken = "owner-token-for-worker-tests"

// realGate is the production Gate (pkg/gate) on a real SQLite file and a
// real loopback listener, in-process.
type realGate struct {
	t      testing.TB
	db     string
	addr   string
	conf   []byte
	cancel context.CancelFunc
	done   chan error
	st     *store.Store
}

// gateJSON is a gate.json for one worker-1 with the given lanes, lifecycle
// and default text plugin.
func gateJSON(db string, lanes int, ttl, retryBase string, maxAttempts int, plugin string) []byte {
	return []byte(fmt.Sprintf(`{"version":1,"listen":"127.0.0.1:0","database":%q,"owner_token_env":"OWNER",
 "recovery_interval":"20ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":%q,"retry_base":%q,"max_attempts":%d},
 "default_execution":{"plugin_id":%q,"environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},
 "workers":[{"id":"worker-1","pool":"local","token_env":"WTOKEN","concurrency":%d}],"repositories":[]}`,
		db, ttl, retryBase, maxAttempts, plugin, lanes))
}

// startRealGate serves conf on addr ("" for an OS-chosen port).
func startRealGate(t testing.TB, conf []byte, addr string) *realGate {
	t.Helper()
	return startRealGateEnv(t, conf, addr, nil)
}

// startRealGateEnv is startRealGate with more environment variables (a
// second Worker's token).
func startRealGateEnv(t testing.TB, conf []byte, addr string, more map[string]string) *realGate {
	t.Helper()
	env := map[string]string{"OWNER": ownerToken, "WTOKEN": testToken}
	for k, v := range more {
		env[k] = v
	}
	cfg, sec, err := gate.LoadConfig(bytes.NewReader(conf), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(cfg, sec, st, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rg := &realGate{t: t, db: cfg.Database, addr: ln.Addr().String(), conf: conf, cancel: cancel, done: make(chan error, 1), st: st}
	go func() { rg.done <- g.Serve(ctx, ln) }()
	t.Cleanup(rg.stop)
	rg.waitReady()
	return rg
}

// waitReady polls /readyz until the Gate has finished its startup sweep.
func (rg *realGate) waitReady() {
	rg.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + rg.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	rg.t.Fatal("gate never became ready")
}

func (rg *realGate) stop() {
	if rg.cancel == nil {
		return
	}
	rg.cancel()
	rg.cancel = nil
	select {
	case err := <-rg.done:
		if err != nil {
			rg.t.Errorf("gate stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		rg.t.Error("gate did not stop")
	}
	rg.st.Close()
}

func (rg *realGate) url() *url.URL { return &url.URL{Scheme: "ws", Host: rg.addr} }

func (rg *realGate) api(method, path string, body []byte) []byte {
	rg.t.Helper()
	req, err := http.NewRequest(method, "http://"+rg.addr+path, bytes.NewReader(body))
	if err != nil {
		rg.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ownerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 {
		rg.t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
	}
	return b
}

func (rg *realGate) submit(input string) string {
	rg.t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input})
	var j struct{ ID string }
	if err := json.Unmarshal(rg.api("POST", "/v1/jobs", body), &j); err != nil {
		rg.t.Fatal(err)
	}
	return j.ID
}

type aggregate struct {
	Job struct {
		Status       string `json:"status"`
		Result       string `json:"result"`
		FailureCode  string `json:"failure_code"`
		AttemptCount int    `json:"attempt_count"`
	} `json:"job"`
	Attempts []struct {
		Ordinal     int    `json:"ordinal"`
		Status      string `json:"status"`
		WorkerID    string `json:"worker_id"`
		Disposition string `json:"disposition"`
		FailureCode string `json:"failure_code"`
	} `json:"attempts"`
	Events []struct {
		Type string `json:"type"`
	} `json:"events"`
}

func (rg *realGate) aggregate(id string) aggregate {
	rg.t.Helper()
	var a aggregate
	if err := json.Unmarshal(rg.api("GET", "/v1/jobs/"+id+"/aggregate", nil), &a); err != nil {
		rg.t.Fatal(err)
	}
	return a
}

func (a aggregate) eventTypes() []string {
	var ts []string
	for _, e := range a.Events {
		ts = append(ts, e.Type)
	}
	return ts
}

// realGateWorker starts a Worker with the test plugins against rg.
func realGateWorker(t *testing.T, rg *realGate, lanes int, heartbeat time.Duration) (*Config, chan Event, net.Listener, func()) {
	t.Helper()
	c, ln := pluginConfig(t)
	c.GateURL, c.Concurrency, c.HeartbeatInterval = rg.url(), lanes, heartbeat
	obs, ev := events()
	stop := startWorker(t, Options{Config: c, Observe: obs, Executors: map[wire.Kind]Executor{wire.KindText: newTestExecutor(t, c)}})
	return c, ev, ln, stop
}

func privateDB(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "forge.db")
}

func TestRealGateTextJobs(t *testing.T) {
	rg := startRealGate(t, gateJSON(privateDB(t), 2, "30s", "1s", 3, "upper"), "")
	_, ev, _, _ := realGateWorker(t, rg, 2, time.Second)
	waitEvent(t, ev, EventConnected)
	waitEvent(t, ev, EventConnected)
	inputs := map[string]string{}
	for i := 0; i < 4; i++ {
		in := fmt.Sprintf("job number %d", i)
		inputs[rg.submit(in)] = in
	}
	for range inputs {
		waitEvent(t, ev, EventReported)
	}
	lanes := map[string]bool{}
	for id, in := range inputs {
		a := rg.aggregate(id)
		if a.Job.Status != "succeeded" || a.Job.Result != strings.ToUpper(in) || len(a.Attempts) != 1 {
			t.Fatalf("job %s: %+v", id, a)
		}
		if got := a.eventTypes(); !slices.Equal(got, []string{"submitted", "leased", "succeeded"}) {
			t.Fatalf("events %v", got)
		}
		lanes[a.Attempts[0].WorkerID] = true
	}
	for l := range lanes {
		if l != "worker-1" && l != "worker-1#1" {
			t.Fatalf("attempt ran on lane %q", l)
		}
	}
}

func TestRealGateRestartLanesReconnect(t *testing.T) {
	db := privateDB(t)
	conf := gateJSON(db, 2, "30s", "1s", 3, "upper")
	rg := startRealGate(t, conf, "")
	_, ev, _, _ := realGateWorker(t, rg, 2, time.Second)
	waitEvent(t, ev, EventConnected)
	waitEvent(t, ev, EventConnected)

	rg.stop()
	waitEvent(t, ev, EventDisconnected)
	waitEvent(t, ev, EventDisconnected)
	rg2 := startRealGate(t, conf, rg.addr)
	waitEvent(t, ev, EventConnected)
	waitEvent(t, ev, EventConnected)
	id := rg2.submit("after restart")
	waitEvent(t, ev, EventReported)
	if a := rg2.aggregate(id); a.Job.Status != "succeeded" || a.Job.Result != "AFTER RESTART" {
		t.Fatalf("after restart: %+v", a)
	}
}

func TestRealGateTakeoverCancelsPlugin(t *testing.T) {
	rg := startRealGate(t, gateJSON(privateDB(t), 1, "30s", "1s", 3, "block"), "")
	_, evA, ln, _ := realGateWorker(t, rg, 1, 50*time.Millisecond)
	waitEvent(t, evA, EventConnected)
	rg.submit("takeover")
	waitEvent(t, evA, EventLeased)
	sc := acceptPlugin(t, ln)
	// A second Worker process with the same id takes lane worker-1 over.
	_, evB, _, _ := realGateWorker(t, rg, 1, 50*time.Millisecond)
	waitEvent(t, evB, EventConnected)
	expectCancelled(t, sc)
	// The old lane learns it from the closed socket or, if a heartbeat
	// crosses the takeover, from its stale reject.
	if e := waitEvent(t, evA, EventLeaseLost); e.Code != "connection_lost" && e.Code != "heartbeat_stale" {
		t.Fatalf("old lane lost its lease with %q", e.Code)
	}
}

func TestRealGateHeartbeatsOutliveTTL(t *testing.T) {
	// The plugin runs several lease TTLs; heartbeats keep the one attempt.
	rg := startRealGate(t, gateJSON(privateDB(t), 1, "800ms", "1s", 1, "slow"), "")
	_, ev, _, _ := realGateWorker(t, rg, 1, 50*time.Millisecond)
	id := rg.submit("kept alive")
	waitEvent(t, ev, EventReported)
	a := rg.aggregate(id)
	if a.Job.Status != "succeeded" || a.Job.Result != "KEPT ALIVE" || a.Job.AttemptCount != 1 {
		t.Fatalf("heartbeats did not keep the lease: %+v", a)
	}
}

func TestRealGateExpiryCancelsPlugin(t *testing.T) {
	// No heartbeat within the TTL: Gate expires the attempt, cancels it,
	// and (max_attempts 1) fails the job.
	rg := startRealGate(t, gateJSON(privateDB(t), 1, "1500ms", "1s", 1, "block"), "")
	_, ev, ln, _ := realGateWorker(t, rg, 1, time.Hour)
	id := rg.submit("left to expire")
	sc := acceptPlugin(t, ln)
	expectCancelled(t, sc)
	if e := waitEvent(t, ev, EventLeaseLost); e.Code != "cancel_expired" {
		t.Fatalf("lease lost with %q", e.Code)
	}
	a := rg.aggregate(id)
	if a.Job.Status != "failed" || len(a.Attempts) != 1 || a.Attempts[0].Status != "expired" {
		t.Fatalf("expired attempt: %+v", a)
	}
}

package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gate"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

const integrationWorkerToken = "worker-token-9b3f-INTEGRATION"

// waitLimit is a safety net against a hung Gate, not a timing assertion.
const waitLimit = 20 * time.Second

// startRealGate runs pkg/gate on a real SQLite file and a loopback port and
// returns its address once /readyz reports ready.
func startRealGate(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "state", "forge.db")
	exec := `{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m",` +
		`"cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}`
	cfgJSON := `{"version":1,"listen":"127.0.0.1:0","database":"` + db + `","owner_token_env":"FORGE_OWNER_TOKEN",` +
		`"recovery_interval":"1s","lease_poll_interval":"1h","default_pool":"text",` +
		`"lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":3},"default_execution":` + exec + `,` +
		`"workers":[{"id":"worker-1","pool":"text","token_env":"FORGE_WORKER_TOKEN","concurrency":1}],` +
		`"repositories":[{"id":"agent-forge","default_branch":"main","worker_pool":"text","execution":` + exec + `}]}`
	env := map[string]string{"FORGE_OWNER_TOKEN": testToken, "FORGE_WORKER_TOKEN": integrationWorkerToken}
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
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gate stopped with %v", err)
			}
		case <-time.After(waitLimit):
			t.Error("gate did not stop")
		}
		st.Close()
	})
	// /readyz turns ready after migrations and the startup sweep.
	addr := ln.Addr().String()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(waitLimit)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case <-tick.C:
		case err := <-done:
			t.Fatalf("gate stopped before ready: %v", err)
		case <-limit:
			t.Fatal("gate never became ready")
		}
	}
}

// lane is a raw forge-wire/v1 Worker lane over a real WebSocket.
type lane struct {
	t   *testing.T
	c   *wire.Conn
	seq uint64
}

func connectLane(t *testing.T, addr string) *lane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := wire.Dial(ctx, "ws://"+addr, integrationWorkerToken)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	hello := &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: 0, Plugins: []string{"reference"}, Repositories: []string{}}
	if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Receive(); err != nil || e.Welcome == nil {
		t.Fatalf("no welcome: %v", err)
	}
	return &lane{t: t, c: c}
}

// lease receives the next message, which must be a lease.
func (l *lane) lease() *wire.Lease {
	l.t.Helper()
	l.c.SetReadDeadline(time.Now().Add(waitLimit))
	e, err := l.c.Receive()
	if err != nil || e.Lease == nil {
		l.t.Fatalf("expected a lease: %v", err)
	}
	return e.Lease
}

func (l *lane) result(r *wire.Result) {
	l.t.Helper()
	l.seq++
	if err := l.c.Send(wire.Envelope{Type: wire.TypeResult, Seq: l.seq, Result: r}); err != nil {
		l.t.Fatal(err)
	}
	l.c.SetReadDeadline(time.Now().Add(waitLimit))
	e, err := l.c.Receive()
	if err != nil || e.Ack == nil || e.Seq != l.seq {
		l.t.Fatalf("result not acknowledged: %v %+v", err, e.Reject)
	}
}

func TestAgainstRealGate(t *testing.T) {
	addr := startRealGate(t)
	env := map[string]string{"FORGE_GATE_URL": "http://" + addr, "FORGE_OWNER_TOKEN": testToken}
	noWorkerToken := func(r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, integrationWorkerToken) {
			t.Fatal("worker token in output")
		}
	}

	// Submit with no Worker connected: the job stays pending.
	r := runForge(t, env, `{"input":"hello agent forge"}`, "submit", "-file", "-")
	wantCode(t, r, ExitOK)
	job := decodeOut[Job](t, r)
	if job.Kind != "text" || job.Status != "pending" || checkJobID(job.ID) != nil {
		t.Fatalf("submitted %+v", job)
	}
	r = runForge(t, env, "", "status", job.ID)
	wantCode(t, r, ExitOK)
	if st := decodeOut[Job](t, r); st.Status != "pending" || st.CreatedAt != job.CreatedAt {
		t.Fatalf("status %+v", st)
	}
	r = runForge(t, env, "", "events", job.ID)
	wantCode(t, r, ExitOK)
	if ev := decodeOut[[]Event](t, r); len(ev) != 1 || ev[0].Type != "submitted" || ev[0].Seq != 1 {
		t.Fatalf("events %+v", ev)
	}
	r = runForge(t, env, "", "result", job.ID)
	wantCode(t, r, ExitOK)
	if agg := decodeOut[Aggregate](t, r); agg.Job.Status != "pending" || len(agg.Attempts) != 0 {
		t.Fatalf("aggregate %+v", agg)
	}
	wantCode(t, runForge(t, env, "", "wait", "-timeout", "50ms", "-poll", "10ms", job.ID), ExitTimedOut)

	// A Worker lane connects, gets the lease at once and succeeds.
	l := connectLane(t, addr)
	lease := l.lease()
	if lease.JobID != job.ID || lease.Ordinal != 1 {
		t.Fatalf("lease for %s ordinal %d", lease.JobID, lease.Ordinal)
	}
	out := "HELLO AGENT FORGE"
	l.result(&wire.Result{JobID: lease.JobID, AttemptID: lease.AttemptID, Outcome: wire.OutcomeSucceeded, Output: &out})
	r = runForge(t, env, "", "wait", "-poll", "10ms", job.ID)
	wantCode(t, r, ExitOK)
	agg := decodeOut[Aggregate](t, r)
	if agg.Job.Status != "succeeded" || agg.Job.Result == nil || *agg.Job.Result != out {
		t.Fatalf("job %+v", agg.Job)
	}
	if len(agg.Attempts) != 1 || agg.Attempts[0].WorkerID != "worker-1" || agg.Attempts[0].Status != "succeeded" || agg.Attempts[0].ID != lease.AttemptID {
		t.Fatalf("attempts %+v", agg.Attempts)
	}
	var types []string
	for _, e := range agg.Events {
		types = append(types, e.Type)
	}
	if strings.Join(types, ",") != "submitted,leased,succeeded" {
		t.Fatalf("events %v", types)
	}
	noWorkerToken(r)

	// submit -wait on a job the Worker fails terminally: exit 3.
	results := make(chan result, 1)
	go func() {
		results <- runForgeRaw(env, `{"input":"please fail"}`, "submit", "-file", "-", "-wait", "-poll", "10ms")
	}()
	lease = l.lease()
	l.result(&wire.Result{JobID: lease.JobID, AttemptID: lease.AttemptID, Outcome: wire.OutcomeFailed,
		Disposition: wire.DispositionTerminal, FailureCode: wire.FailureInvalidTask})
	r = checkResult(t, []string{"submit", "-wait"}, <-results)
	wantCode(t, r, ExitJobFailed)
	if agg := decodeOut[Aggregate](t, r); agg.Job.Status != "failed" || agg.Job.FailureCode == nil || *agg.Job.FailureCode != "invalid_task" {
		t.Fatalf("failed job %+v", agg.Job)
	}

	// The Worker token is not an owner token.
	r = runForge(t, map[string]string{"FORGE_GATE_URL": "http://" + addr, "FORGE_OWNER_TOKEN": integrationWorkerToken}, "", "status", job.ID)
	wantCode(t, r, ExitErr)
	if !strings.HasPrefix(r.stderr, "forge: error: unauthorized") {
		t.Fatalf("stderr %q", r.stderr)
	}
	noWorkerToken(r)

	// The Gate's live-activity route decodes into what wait -progress reads.
	var cl client
	cl.base, cl.token, cl.http = "http://"+addr, testToken, http.DefaultClient
	var act activityAnswer
	if err := cl.do(context.Background(), http.MethodGet, "/v1/debug/jobs/"+job.ID+"/activity", nil, http.StatusOK, &act); err != nil {
		t.Fatalf("activity route: %v", err)
	}
	if err := act.validate(); err != nil {
		t.Fatalf("activity answer: %v", err)
	}

	// Shape-valid tasks the Gate rejects map its error body.
	r = runForge(t, env, `{"repository_id":"not-registered","base_sha":"0123456789abcdef0123456789abcdef01234567","instruction":"x"}`, "submit", "-file", "-")
	wantCode(t, r, ExitErr)
	if !regexpGateError.MatchString(r.stderr) {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = runForge(t, env, "", "status", "0123456789abcdef0123456789abcdef")
	wantCode(t, r, ExitErr)
	if !strings.HasPrefix(r.stderr, "forge: error: not_found") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

var regexpGateError = regexp.MustCompile(`^forge: error: [a-z][a-z0-9_]*(: [^\n]+)?\n`)

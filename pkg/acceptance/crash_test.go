package acceptance

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestGateCrashAfterSubmitAck: every job the Gate acknowledged exists after
// a SIGKILL, with its submitted event, and is then run to completion.
func TestGateCrashAfterSubmitAck(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	// Concurrent submissions, SIGKILL right after the last ACK.
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := g.submit(t, `{"input":"durable job"}`)
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}()
	}
	wg.Wait()
	g.kill()
	g.start()
	for _, id := range ids {
		j := g.job(t, id)
		if j.Status != "pending" || j.Kind != "text" {
			t.Fatalf("job %s after crash: %+v", id, j)
		}
	}
	g.startWorker(t, workerOpts{})
	for _, id := range ids {
		j := g.waitTerminal(t, id)
		if j.Status != "succeeded" || *j.Result != "DURABLE JOB" {
			t.Fatalf("job %s: %+v", id, j)
		}
	}
	g.assertNoSecrets(t, "durable job")
}

// TestGateCrashDuringLeaseAndAfterResult: a raw lane holds a lease and the
// Gate is SIGKILLed; after the restart the job is still leased, and the
// lane's new connection (a new generation) cannot publish or extend the
// old attempt. Then a result is ACKed and the Gate SIGKILLed at once: the
// result is there after the next restart.
func TestGateCrashDuringLeaseAndAfterResult(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{leaseTTL: "30s"})
	w, _ := g.lane(t, 0, 0)
	id := g.submit(t, `{"input":"crash"}`)
	e := w.recv(t)
	if e.Type != "lease" {
		t.Fatalf("lease: %+v", e)
	}
	att := e.Lease.AttemptID
	g.kill()
	w.expectClosed(t)
	g.start()
	if j := g.job(t, id); j.Status != "leased" {
		t.Fatalf("leased job after crash: %+v", j)
	}
	// The crashed Gate's lane is recorded as disconnected after restart.
	if r := g.do(t, "GET", "/v1/debug/workers", nil, g.bearer()); !strings.Contains(string(r.body), `"connected":false`) || strings.Contains(string(r.body), `"connected":true`) {
		t.Fatalf("lanes after restart: %s", r.body)
	}
	// A new connection is a new generation: the old attempt is fenced.
	w2, _ := g.lane(t, 0, 0)
	w2.sendJSON(t, resultMsg(1, id, att, "CRASH"))
	if r := w2.recv(t); r.Type != "reject" || r.Reject.Code != "stale" {
		t.Fatalf("result from a new generation: %+v", r)
	}
	w2.sendJSON(t, heartbeatMsg(2, id, att))
	if r := w2.recv(t); r.Type != "reject" {
		t.Fatalf("heartbeat from a new generation: %+v", r)
	}
	if j := g.job(t, id); j.Status != "leased" || j.Result != nil {
		t.Fatalf("job after fenced result: %+v", j)
	}
	g.kill()
	g.start()
	// Durability of an acknowledged result: a fresh job is leased and
	// completed, and the Gate is SIGKILLed right after the result's ACK.
	w3, _ := g.lane(t, 0, 0)
	id2 := g.submit(t, `{"input":"second"}`)
	e = w3.recv(t)
	if e.Type != "lease" || e.Lease.JobID != id2 {
		t.Fatalf("lease of the second job: %+v", e)
	}
	w3.sendJSON(t, resultMsg(1, id2, e.Lease.AttemptID, "SECOND"))
	if r := w3.recv(t); r.Type != "ack" {
		t.Fatalf("result: %+v", r)
	}
	g.kill()
	g.start()
	a := g.aggregate(t, id2)
	if a.Job.Status != "succeeded" || a.Job.Result == nil || *a.Job.Result != "SECOND" || len(a.Attempts) != 1 || a.Attempts[0].Status != "succeeded" {
		t.Fatalf("acknowledged result lost in a crash: %+v", a)
	}
	types := []string{}
	for _, ev := range a.Events {
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "submitted,leased,succeeded" {
		t.Fatalf("events %v", types)
	}
	if j := g.job(t, id); j.Status != "leased" && j.Status != "retry_wait" && j.Status != "pending" {
		t.Fatalf("first job: %+v", j)
	}
	g.assertNoSecrets(t, "crash", "second")
}

// TestWorkerCrashMidPlugin: the Worker is SIGKILLed while its plugin runs.
// The lease expires and the retry succeeds on a restarted Worker, and the
// plugin and its child do not outlive the dead Worker.
func TestWorkerCrashMidPlugin(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{leaseTTL: "1s", retryBase: "50ms"})
	w := g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	m := newMarker(t)
	id := g.submit(t, `{"input":"block `+m+`"}`)
	pids := waitMarked(t, m, 1) // the plugin's child, then the plugin
	t.Cleanup(func() { killAll(pids) })
	w.kill()
	g.waitJob(t, id, "retried", func(j apiJob) bool { return j.AttemptCount >= 2 || j.Status == "retry_wait" })
	if left := waitGone(pids, 20*time.Second); len(left) != 0 {
		t.Errorf("plugin processes %v outlived the SIGKILLed Worker", left)
	}
	a := g.aggregate(t, id)
	if len(a.Attempts) < 1 || a.Attempts[0].Status != "expired" || a.Attempts[0].FailureCode != "lease_expired" {
		t.Fatalf("first attempt: %+v", a.Attempts)
	}
}

// TestLeaseExpiryMidPlugin: a Worker whose heartbeats cannot keep the
// lease (interval longer than the TTL) gets cancel{expired}; it stops the
// plugin (nothing lingers), the job is retried and ends
// max_attempts_exceeded with every attempt lease_expired.
func TestLeaseExpiryMidPlugin(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{leaseTTL: "500ms", maxAttempts: 2, retryBase: "50ms"})
	g.startWorker(t, workerOpts{heartbeat: "5s", plugins: map[string]string{"reference": scenarioPlugin(t)}})
	m := newMarker(t)
	id := g.submit(t, `{"input":"block `+m+`"}`)
	pids := waitMarked(t, m, 1) // the plugin's child, then the plugin
	t.Cleanup(func() { killAll(pids) })
	j := g.waitTerminal(t, id)
	if j.Status != "failed" || j.FailureCode != "max_attempts_exceeded" || j.AttemptCount != 2 {
		t.Fatalf("job %+v", j)
	}
	for _, at := range g.aggregate(t, id).Attempts {
		if at.Status != "expired" || at.FailureCode != "lease_expired" {
			t.Fatalf("attempt %+v", at)
		}
	}
	if left := waitGone(pids, 20*time.Second); len(left) != 0 {
		t.Fatalf("plugin processes %v outlived the cancelled attempt", left)
	}
}

// TestWorkerSigtermMidPlugin: SIGTERM stops the Worker cleanly (exit 0);
// the running attempt is reported worker_shutdown (retryable), the plugin
// is stopped, and a new Worker completes the retry.
func TestWorkerSigtermMidPlugin(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{maxAttempts: 2, retryBase: "50ms"})
	w := g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	m := newMarker(t)
	id := g.submit(t, `{"input":"block `+m+`"}`)
	pids := waitMarked(t, m, 1) // the plugin's child, then the plugin
	t.Cleanup(func() { killAll(pids) })
	w.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-w.done; err != nil {
		t.Fatalf("worker exit on SIGTERM: %v", err)
	}
	w.cmd = nil
	if left := waitGone(pids, 20*time.Second); len(left) != 0 {
		t.Fatalf("plugin processes %v outlived the stopped Worker", left)
	}
	a := g.aggregate(t, id)
	if len(a.Attempts) != 1 || a.Attempts[0].Status != "failed" || a.Attempts[0].FailureCode != "worker_shutdown" || a.Attempts[0].Disposition != "retryable" {
		t.Fatalf("attempt after SIGTERM: %+v", a.Attempts)
	}
	// The retry runs the reference plugin on a fresh Worker.
	g.startWorker(t, workerOpts{})
	j := g.waitTerminal(t, id)
	if j.Status != "succeeded" || j.AttemptCount != 2 {
		t.Fatalf("job %+v", j)
	}
}

// freePort picks a loopback port for a Gate that must come back on the
// same address.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestGateCrashWithRealWorker: the Gate is SIGKILLed while a real Worker
// runs a plugin, and restarted on the same address. The Worker reconnects,
// its late result for the fenced attempt changes nothing, the attempt
// expires and the retry succeeds; a new job also runs.
func TestGateCrashWithRealWorker(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{listen: freePort(t), leaseTTL: "2s", retryBase: "50ms"})
	w := g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	id := g.submit(t, `{"input":"sleep 1 restarted"}`)
	g.waitJob(t, id, "leased", func(j apiJob) bool { return j.Status == "leased" })
	g.kill()
	g.start()
	j := g.waitTerminal(t, id)
	if j.Status != "succeeded" || *j.Result != "RESTARTED" {
		t.Fatalf("job %+v\nworker log:\n%s", j, w.logs.String())
	}
	a := g.aggregate(t, id)
	if len(a.Attempts) != 2 || a.Attempts[0].Status != "expired" || a.Attempts[1].Status != "succeeded" {
		t.Fatalf("attempts %+v", a.Attempts)
	}
	id2 := g.submit(t, `{"input":"ok after restart"}`)
	if j := g.waitTerminal(t, id2); j.Status != "succeeded" || *j.Result != "AFTER RESTART" {
		t.Fatalf("job after restart %+v", j)
	}
}

// TestGateCrashDuringSubmitStorm: the Gate is SIGKILLed while clients
// submit concurrently; every submission that got a 201 exists after the
// restart (answers cut off by the crash may or may not have been stored).
func TestGateCrashDuringSubmitStorm(t *testing.T) {
	t.Parallel()
	for _, withLanes := range []bool{false, true} {
		t.Run(map[bool]string{false: "no lane", true: "idle lanes"}[withLanes], func(t *testing.T) {
			t.Parallel()
			submitStorm(t, withLanes)
		})
	}
}

// submitStorm is TestGateCrashDuringSubmitStorm, optionally with idle raw
// lanes connected so that submissions lease in the same commit.
func submitStorm(t *testing.T, withLanes bool) {
	g := newGate(t, gateOpts{workers: []gateWorker{{id: "worker-1", concurrency: 4}}})
	if withLanes {
		for slot := 0; slot < 4; slot++ {
			g.lane(t, 0, slot)
		}
	}
	url, owner := g.url(), g.owner
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", url+"/v1/jobs", strings.NewReader(`{"input":"storm"}`))
				req.Header.Set("Authorization", "Bearer "+owner)
				resp, err := client.Do(req)
				if err != nil {
					continue // the Gate is down
				}
				var j struct{ ID string }
				if resp.StatusCode == http.StatusCreated && json.NewDecoder(resp.Body).Decode(&j) == nil {
					mu.Lock()
					acked = append(acked, j.ID)
					mu.Unlock()
				}
				resp.Body.Close()
			}
		}()
	}
	// Crash once some jobs were acknowledged.
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 20 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	g.kill()
	close(stop)
	wg.Wait()
	g.start()
	mu.Lock()
	defer mu.Unlock()
	leased := 0
	for _, id := range acked {
		j := g.job(t, id)
		switch {
		case j.Status == "leased" && withLanes:
			leased++
		case j.Status != "pending":
			t.Fatalf("acknowledged job %s after crash: %+v", id, j)
		}
	}
	if withLanes && leased == 0 {
		t.Fatal("no submission was leased: the lanes were not used")
	}
}

// TestGateGracefulStop: SIGTERM stops the Gate with exit 0 and its state
// is intact after a restart.
func TestGateGracefulStop(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	g.startWorker(t, workerOpts{})
	id := g.submit(t, `{"input":"graceful"}`)
	g.waitTerminal(t, id)
	if err := g.stop(); err != nil {
		t.Fatalf("gate exit on SIGTERM: %v\n%s", err, g.logs.String())
	}
	g.start()
	if j := g.job(t, id); j.Status != "succeeded" || *j.Result != "GRACEFUL" {
		t.Fatalf("job after restart: %+v", j)
	}
}

// TestPolicyIsFixedAtSubmission: a job keeps the lifecycle resolved when
// it was accepted, whatever the Gate's config says after a restart.
func TestPolicyIsFixedAtSubmission(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{maxAttempts: 1})
	old := g.submit(t, `{"input":"failure"}`)
	g.kill()
	b, err := os.ReadFile(g.cfgPath)
	must(t, err)
	must(t, os.WriteFile(g.cfgPath, []byte(strings.Replace(string(b), `"max_attempts":1`, `"max_attempts":3`, 1)), 0o600))
	g.start()
	fresh := g.submit(t, `{"input":"failure"}`)
	g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	for id, attempts := range map[string]int{old: 1, fresh: 3} {
		j := g.waitTerminal(t, id)
		if j.Status != "failed" || j.FailureCode != "max_attempts_exceeded" || j.AttemptCount != attempts {
			t.Fatalf("job %+v, want %d attempts", j, attempts)
		}
	}
}

package gate

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// TestSyncReplicationUnconfirmedWrites: a Gate in "sync" mode whose
// Litestream goes away answers a submit 503 unavailable once the store's
// retries run out (it acknowledged it before the change: the old Gate
// stopped on the store error instead), keeps serving reads, warns, and
// acknowledges submits again once Litestream is back. Worker lanes live
// through the outage: a lane's heartbeats, sent one after another without
// waiting, are all answered unavailable (the old store waited out a retry
// window for each in turn), its result is refused unavailable on a
// connection that stays open (the old Gate closed it) and taken when sent
// again once Litestream is back; the lease the refused submit granted an
// idle lane goes back to the queue (the old Gate left the lane holding it
// until it expired) and is leased again once the replica confirms writes.
func TestSyncReplicationUnconfirmedWrites(t *testing.T) {
	bin, err := exec.LookPath("litestream")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("litestream is not installed (.ci/run installs it)")
		}
		t.Skip("litestream is not installed")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(root, "state", "forge.db")
	sock := filepath.Join(root, "litestream.sock")
	cfgPath := filepath.Join(root, "litestream.yml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("socket:\n  enabled: true\n  path: %s\n  permissions: 0600\ndbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n",
		sock, db, filepath.Join(root, "replica"))), 0o600)
	var ls *exec.Cmd
	start := func() {
		os.Remove(sock)
		ls = exec.Command(bin, "replicate", "-config", cfgPath)
		ls.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := ls.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("litestream's control socket did not appear")
			}
		}
	}
	kill := func() {
		if ls != nil {
			syscall.Kill(-ls.Process.Pid, syscall.SIGKILL)
			ls.Wait()
			ls = nil
		}
	}
	defer kill()
	start()

	cfg, sec := testConfig(t, func(m map[string]any) {
		m["database"], m["replication"], m["replication_socket"] = db, "sync", sock
	})
	st, err := store.OpenReplicated(context.Background(), db, cfg.replication())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	tg := startGateOn(t, cfg, sec, db, st, time.Now, logs, nil)
	a := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	first := tg.submit(`{"input":"hello"}`)
	l1 := a.lease()
	b := connect(t, tg.addr, testWorkerToken, "worker-1", 1, plugins(), noRepos())
	tg.waitLaneIdle(b)

	kill()
	// The submit reserves idle lane b: the job and b's lease commit
	// locally, unconfirmed.
	code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"input":"unconfirmed"}`))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("submit without litestream: %d %s", code, body)
	}
	const beats = 5
	for i := 0; i < beats; i++ {
		a.seq++
		if err := a.c.Send(wire.Envelope{Type: wire.TypeHeartbeat, Seq: a.seq,
			Heartbeat: &wire.Heartbeat{JobID: l1.JobID, AttemptID: l1.AttemptID}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, deadline := 0, time.After(waitLimit); i < beats; i++ {
		select {
		case r := <-a.replies:
			wantReject(t, r, wire.RejectUnavailable)
		case <-a.closed:
			t.Fatalf("lane closed after %d heartbeat answers", i)
		case <-deadline:
			t.Fatalf("%d of %d heartbeats answered while litestream is gone", i, beats)
		}
	}
	wantReject(t, a.textResult(l1, "done"), wire.RejectUnavailable)
	if j := tg.job(first.ID); j.ID != first.ID {
		t.Fatalf("read without litestream: %+v", j)
	}
	if code, _ := tg.api("GET", "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz without litestream: %d", code)
	}

	start()
	// The result sent again, as a Worker does every heartbeat interval,
	// is taken once the store sees the replica confirm again.
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
		r := a.textResult(l1, "done")
		if r.Ack != nil {
			break
		}
		wantReject(t, r, wire.RejectUnavailable)
		if time.Now().After(deadline) {
			t.Fatal("the result sent again was never taken")
		}
	}
	if j := tg.job(first.ID); j.Status != "succeeded" {
		t.Fatalf("the result taken once litestream was back: %+v", j)
	}
	// The unconfirmed job was given back: one of the lanes gets it now.
	var w *rawWorker
	var l2 *wire.Lease
	select {
	case e := <-a.pushes:
		w, l2 = a, e.Lease
	case e := <-b.pushes:
		w, l2 = b, e.Lease
	case <-time.After(waitLimit):
		t.Fatal("the job of the refused submit was never leased again")
	}
	if l2 == nil || l2.JobID == first.ID || l2.Ordinal != 1 {
		t.Fatalf("lease after the outage: %+v (want the refused submit's job, first attempt)", l2)
	}
	wantAck(t, w.heartbeat(l2))
	wantAck(t, w.textResult(l2, "done"))
	if j := tg.job(l2.JobID); j.Status != "succeeded" || j.AttemptCount != 1 {
		t.Fatalf("the refused submit's job: %+v", j)
	}
	tg.submit(`{"input":"again"}`)
	if !strings.Contains(logs.String(), "the replica did not confirm a write") ||
		!strings.Contains(logs.String(), "the replica confirms writes again") {
		t.Fatalf("outage not logged:\n%s", logs.String())
	}
	tg.stop() // before Litestream: its last writes are confirmed
}

// waitLaneIdle waits until w's lane is idle on the Gate (its Lease call
// at connect has ended), so the next submit reserves it.
func (tg *testGate) waitLaneIdle(w *rawWorker) {
	tg.t.Helper()
	reg := &tg.g.lanes
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(time.Millisecond) {
		reg.mu.Lock()
		l := reg.lanes[w.welcome.Lane]
		idle := l != nil && l.state == laneIdle
		reg.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			tg.t.Fatal("lane never idle")
		}
	}
}

// TestSyncReplicationStartsWithoutLitestream: a sync-mode Gate started
// while Litestream is down starts (the old Gate stopped: its startup
// writes were not confirmed), serves reads and answers submits 503
// unavailable, and takes submits once Litestream is there.
func TestSyncReplicationStartsWithoutLitestream(t *testing.T) {
	bin, err := exec.LookPath("litestream")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("litestream is not installed (.ci/run installs it)")
		}
		t.Skip("litestream is not installed")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(root, "state", "forge.db")
	sock := filepath.Join(root, "litestream.sock")
	cfgPath := filepath.Join(root, "litestream.yml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("socket:\n  enabled: true\n  path: %s\n  permissions: 0600\ndbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n",
		sock, db, filepath.Join(root, "replica"))), 0o600)
	cfg, sec := testConfig(t, func(m map[string]any) {
		m["database"], m["replication"], m["replication_socket"] = db, "sync", sock
	})
	st, err := store.OpenReplicated(context.Background(), db, cfg.replication())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	tg := startGateOn(t, cfg, sec, db, st, time.Now, logs, nil)
	code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"input":"early"}`))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("submit without litestream: %d %s", code, body)
	}
	if code, _ := tg.api("GET", "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz without litestream: %d", code)
	}
	ls := exec.Command(bin, "replicate", "-config", cfgPath)
	ls.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		tg.stop() // before Litestream: its last writes are confirmed
		syscall.Kill(-ls.Process.Pid, syscall.SIGKILL)
		ls.Wait()
	}()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
		code, body = tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"input":"later"}`))
		if code == http.StatusCreated {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("submit once litestream runs: %d %s", code, body)
		}
	}
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	l := w.lease()
	wantAck(t, w.textResult(l, "done"))
}

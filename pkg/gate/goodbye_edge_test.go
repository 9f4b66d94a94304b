package gate

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
	_ "modernc.org/sqlite"
)

// A goodbye that names nothing does not give back a lease the lane has
// already heartbeated: that attempt was started, so it keeps its lease and
// its result is recorded.
func TestGoodbyeKeepsHeartbeatedLease(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	wantAck(t, w.heartbeat(l))
	wantAck(t, w.goodbye(nil))
	if j := tg.job(job.ID); j.Status != "leased" || j.AttemptCount != 1 {
		t.Fatalf("a started lease was given back: %+v", j)
	}
	wantAck(t, w.textResult(l, "ok"))
	if j := tg.job(job.ID); j.Status != "succeeded" || j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
}

// A second goodbye changes nothing: the attempt the first one named keeps
// its lease and its result is recorded.
func TestRepeatedGoodbyeKeepsRunningAttempt(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	wantAck(t, w.goodbye(l))
	wantAck(t, w.goodbye(nil))
	if j := tg.job(job.ID); j.Status != "leased" || j.AttemptCount != 1 {
		t.Fatalf("the running attempt was given back: %+v", j)
	}
	wantAck(t, w.failResult(l, wire.FailureWorkerShutdown))
	if j := tg.job(job.ID); j.Status != "retry_wait" || j.AttemptCount != 1 {
		t.Fatalf("job %+v", j)
	}
}

// A goodbye that arrives while a lease for the lane is being granted is
// answered only once that lease is back in the queue: after the ack,
// nothing is leased to the lane.
func TestGoodbyeWaitsForLeaseInFlight(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	// Hold SQLite's write lock so that the submit's lease for the idle
	// lane stays in flight (the store's writer waits for the lock).
	db, err := sql.Open("sqlite", "file:"+tg.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	unlock := func() {
		if locked {
			locked = false
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"input":"x"}`))
	}()
	time.Sleep(200 * time.Millisecond) // the submit reserves the lane, then waits for the writer
	w.seq++
	seq := w.seq
	if err := w.c.Send(wire.Envelope{Type: wire.TypeGoodbye, Seq: seq, Goodbye: &wire.Goodbye{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-w.replies:
		t.Fatalf("goodbye answered (%s) while a lease for the lane was in flight", r.Type)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	var r wire.Envelope
	select {
	case r = <-w.replies:
	case <-time.After(waitLimit):
		t.Fatal("goodbye unanswered")
	}
	if r.Seq != seq {
		t.Fatalf("reply seq %d", r.Seq)
	}
	wantAck(t, r)
	var leased int
	if err := db.QueryRow(`SELECT count(*) FROM attempts WHERE status = 'leased'`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Fatalf("%d attempts leased after the goodbye's ack", leased)
	}
	<-submitted
	select {
	case e := <-w.pushes:
		t.Fatalf("draining lane got %s", e.Type)
	default:
	}
}

// An idle for the attempt the lane runs makes the lane idle while the
// store still holds that lease; once a result for it is recorded after
// all, the lane is leased its next job at once (not at the next poll).
func TestResultAfterIdleLeasesNext(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	tg.submit(`{"input":"x"}`)
	l1 := w.lease()
	queued := tg.submit(`{"input":"y"}`)
	w.idle(l1)
	time.Sleep(100 * time.Millisecond) // the lane asks for work and is refused: l1 is still leased to it
	wantAck(t, w.textResult(l1, "ok"))
	l2 := w.lease()
	if l2.JobID != queued.ID || l2.Ordinal != 1 {
		t.Fatalf("lease after the late result %+v", l2)
	}
}

// A lease the lane reported live activity for was started: a goodbye that
// names nothing does not give it back.
func TestGoodbyeKeepsLeaseWithActivity(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	w := connectOffering(t, tg, 0, activity.Offer())
	job := tg.submit(`{"input":"x"}`)
	l := w.lease()
	if err := w.c.Send(wire.Envelope{Type: wire.TypeActivity, Activity: &wire.Activity{JobID: l.JobID, AttemptID: l.AttemptID, Version: activity.Version, Stage: activity.StageAnalyzing}}); err != nil {
		t.Fatal(err)
	}
	wantAck(t, w.goodbye(nil))
	if j := tg.job(job.ID); j.Status != "leased" || j.AttemptCount != 1 {
		t.Fatalf("a started lease was given back: %+v", j)
	}
	wantAck(t, w.textResult(l, "ok"))
}

// noSweeps keeps the sweeper from reading a store a test closes.
func noSweeps(m map[string]any) { m["recovery_interval"] = "1h" }

// A goodbye whose unstarted lease could not be returned (the store fails)
// is not acknowledged: the ack would say that nothing is left leased to
// the lane. It is answered reject unavailable.
func TestGoodbyeNotAckedWhenReleaseFails(t *testing.T) {
	cfg, sec := testConfig(t, noSweeps)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	tg.submit(`{"input":"x"}`)
	w.lease()
	tg.st.Close() // every store call now fails
	wantReject(t, w.goodbye(nil), wire.RejectUnavailable)
}

// The same when the lease being granted at the goodbye could not be
// returned by the Lease call the goodbye waits for.
func TestGoodbyeNotAckedWhenInFlightReleaseFails(t *testing.T) {
	cfg, sec := testConfig(t, noSweeps)
	tg := startGate(t, cfg, sec, "", nil)
	w := connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	reg := &tg.g.lanes
	var l *lane
	for deadline := time.Now().Add(waitLimit); ; {
		reg.mu.Lock()
		if l = reg.lanes[w.welcome.Lane]; l != nil && l.state == laneIdle {
			l.wake() // a Lease call is in flight for it (this test plays it)
			reg.mu.Unlock()
			break
		}
		reg.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("lane never idle")
		}
		time.Sleep(time.Millisecond)
	}
	w.seq++
	seq := w.seq
	if err := w.c.Send(wire.Envelope{Type: wire.TypeGoodbye, Seq: seq, Goodbye: &wire.Goodbye{}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLimit); ; {
		reg.mu.Lock()
		draining := l.draining
		reg.mu.Unlock()
		if draining {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("goodbye not seen")
		}
		time.Sleep(time.Millisecond)
	}
	tg.st.Close()
	// The call's grant, which it must give back: the store fails.
	tg.g.afterLease(l, &store.Lease{JobID: "j1", AttemptID: "a1"}, nil)
	select {
	case r := <-w.replies:
		if r.Seq != seq {
			t.Fatalf("reply seq %d", r.Seq)
		}
		wantReject(t, r, wire.RejectUnavailable)
	case <-time.After(waitLimit):
		t.Fatal("goodbye unanswered")
	}
}

package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// laneWorker starts a one-lane Worker with executor x against rg.
func laneWorker(t *testing.T, rg *realGate, x Executor, heartbeat time.Duration) (chan Event, func()) {
	t.Helper()
	c, _ := hostFixture(t)
	c.GateURL, c.Concurrency, c.HeartbeatInterval = rg.url(), 1, heartbeat
	obs, ev := events()
	stop := startWorker(t, Options{Config: c, Observe: obs, Executors: map[wire.Kind]Executor{wire.KindText: x}})
	return ev, stop
}

// waitTerminal polls a job's aggregate until it has succeeded or failed.
func (rg *realGate) waitTerminal(id string) aggregate {
	rg.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		a := rg.aggregate(id)
		if a.Job.Status == "succeeded" || a.Job.Status == "failed" {
			return a
		}
		time.Sleep(20 * time.Millisecond)
	}
	rg.t.Fatalf("job %s never ended", id)
	return aggregate{}
}

// startedLog records which jobs an executor was started for.
type startedLog struct {
	mu   sync.Mutex
	jobs []string
}

func (s *startedLog) add(job string) {
	s.mu.Lock()
	s.jobs = append(s.jobs, job)
	s.mu.Unlock()
}

func (s *startedLog) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.jobs...)
}

// blockingExec runs job "block" until its context ends; any other job
// succeeds at once.
type blockingExec struct {
	started startedLog
	running chan string
}

func (x *blockingExec) Execute(ctx context.Context, a *Attempt) Report {
	l := a.Lease
	x.started.add(l.JobID)
	r, ok := upper(l)
	if ok {
		return r
	}
	x.running <- l.JobID
	<-ctx.Done()
	return Report{Cancelled: true, Code: CodePluginFailed}
}

// Stopping a Worker whose only lane runs one job while six more are queued
// must cost the running job one worker_shutdown attempt and nothing else:
// the queued jobs are never leased to the stopping lane, and nothing stays
// leased to the gone connection.
func TestRealGateStopLeavesQueuedJobsUntouched(t *testing.T) {
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			rg := startRealGate(t, gateJSON(privateDB(t), 1, "30s", "1s", 3, "reference"), "")
			x := &blockingExec{running: make(chan string, 1)}
			ev, stop := laneWorker(t, rg, x, 50*time.Millisecond)
			waitEvent(t, ev, EventConnected)
			running := rg.submit("block")
			recv(t, x.running, "the first job to run")
			var queued []string
			for i := 0; i < 6; i++ {
				queued = append(queued, rg.submit(fmt.Sprintf("queued %d", i)))
			}
			stop()

			a := rg.aggregate(running)
			if a.Job.Status != "retry_wait" || len(a.Attempts) != 1 || a.Attempts[0].FailureCode != "worker_shutdown" {
				t.Fatalf("running job after stop: %+v", a)
			}
			for _, id := range queued {
				if a := rg.aggregate(id); a.Job.Status != "pending" || len(a.Attempts) != 0 || a.Job.AttemptCount != 0 {
					t.Errorf("queued job %s after stop: %+v", id, a)
				}
			}
			if got := x.started.list(); len(got) != 1 || got[0] != running {
				t.Errorf("executor started for %v, want only %s", got, running)
			}
		})
	}
}

// slowCleanupExec runs job "block" until its context ends and then takes
// a while to clean up; any other job succeeds at once.
type slowCleanupExec struct {
	blockingExec
	cleanup time.Duration
	mu      sync.Mutex
	done    time.Time // when the slow job returned
	next    time.Time // when a later job started
}

func (x *slowCleanupExec) Execute(ctx context.Context, a *Attempt) Report {
	l := a.Lease
	if _, ok := upper(l); ok {
		x.mu.Lock()
		x.next = time.Now()
		x.mu.Unlock()
	}
	r := x.blockingExec.Execute(ctx, a)
	if r.Cancelled {
		time.Sleep(x.cleanup)
		x.mu.Lock()
		x.done = time.Now()
		x.mu.Unlock()
	}
	return r
}

// expectNoDisconnect fails if ev holds a disconnect.
func expectNoDisconnect(t *testing.T, ev chan Event) {
	t.Helper()
	for {
		select {
		case e := <-ev:
			if e.Kind == EventDisconnected {
				t.Fatal("the lane's connection dropped")
			}
		default:
			return
		}
	}
}

// An attempt that expires (no heartbeat within the TTL) is cancelled; its
// executor takes a while to return. The queued job must not be leased into
// that window: it runs once the lane is idle again, on the same connection,
// with its single attempt.
func TestRealGateLeaseWaitsForSlowCleanup(t *testing.T) {
	rg := startRealGate(t, gateJSON(privateDB(t), 1, "1s", "1s", 1, "reference"), "")
	x := &slowCleanupExec{blockingExec: blockingExec{running: make(chan string, 1)}, cleanup: 700 * time.Millisecond}
	ev, _ := laneWorker(t, rg, x, time.Hour)
	waitEvent(t, ev, EventConnected)
	first := rg.submit("block")
	recv(t, x.running, "the first job to run")
	next := rg.submit("next")
	if a := rg.waitTerminal(next); a.Job.Status != "succeeded" || a.Job.AttemptCount != 1 {
		t.Fatalf("queued job: %+v", a)
	}
	if a := rg.aggregate(first); a.Job.Status != "failed" || len(a.Attempts) != 1 || a.Attempts[0].Status != "expired" {
		t.Fatalf("expired job: %+v", a)
	}
	x.mu.Lock()
	done, started := x.done, x.next
	x.mu.Unlock()
	if done.IsZero() || started.Before(done) {
		t.Fatalf("next job started %v before the cancelled one returned %v", started, done)
	}
	expectNoDisconnect(t, ev)
}

// The same window with a real plugin that ignores cancel: the plugin
// runner drains it and then terminates it.
func TestRealGateLeaseWaitsForPluginIgnoringCancel(t *testing.T) {
	rg := startRealGate(t, gateJSON(privateDB(t), 1, "1s", "1s", 1, "stubborn"), "")
	_, ev, _, _ := realGateWorker(t, rg, 1, time.Hour)
	waitEvent(t, ev, EventConnected)
	first := rg.submit("hang")
	waitEvent(t, ev, EventLeased)
	next := rg.submit("next")
	if a := rg.waitTerminal(next); a.Job.Status != "succeeded" || a.Job.Result != "NEXT" || a.Job.AttemptCount != 1 {
		t.Fatalf("queued job: %+v", a)
	}
	if a := rg.aggregate(first); a.Job.Status != "failed" || len(a.Attempts) != 1 || a.Attempts[0].Status != "expired" {
		t.Fatalf("expired job: %+v", a)
	}
	expectNoDisconnect(t, ev)
}

package worker

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// scriptedExec is an Executor the test controls: it announces each lease
// and then either returns the next scripted report or, for "block", waits
// until its context ends.
type scriptedExec struct {
	started   chan *wire.Lease
	cancelled chan string // job ids whose ctx ended
	reply     func(l *wire.Lease) (Report, bool)
}

func newScriptedExec(reply func(l *wire.Lease) (Report, bool)) *scriptedExec {
	return &scriptedExec{started: make(chan *wire.Lease, 16), cancelled: make(chan string, 16), reply: reply}
}

func (x *scriptedExec) Execute(ctx context.Context, a *Attempt) Report {
	l := a.Lease
	x.started <- l
	if r, ok := x.reply(l); ok {
		return r
	}
	<-ctx.Done()
	x.cancelled <- l.JobID
	return Report{Cancelled: true, Code: CodePluginFailed}
}

func upper(l *wire.Lease) (Report, bool) {
	var task wire.TextTask
	if err := json.Unmarshal(l.Task, &task); err != nil {
		return Report{Code: CodeInvalidTask}, true
	}
	if task.Input == "block" {
		return Report{}, false
	}
	out := []byte(task.Input)
	for i, b := range out {
		if b >= 'a' && b <= 'z' {
			out[i] = b - 32
		}
	}
	return Report{Succeeded: true, Output: string(out)}, true
}

func laneConfig(t *testing.T, g *fakeGate, concurrency int) *Config {
	t.Helper()
	c, _ := hostFixture(t)
	c.GateURL = g.url()
	c.Concurrency = concurrency
	c.HeartbeatInterval = 20 * time.Millisecond
	return c
}

func recv[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func TestLanesHelloAndTextResult(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	startWorker(t, Options{Config: laneConfig(t, g, 2), Executors: map[wire.Kind]Executor{wire.KindText: x}})

	c0, c1 := g.accept(), g.accept()
	slots := []int{c0.hello.Slot, c1.hello.Slot}
	slices.Sort(slots)
	if !slices.Equal(slots, []int{0, 1}) {
		t.Fatalf("slots %v, want [0 1]", slots)
	}
	for _, c := range []*gateConn{c0, c1} {
		h := c.hello
		if h.Protocol != wire.Protocol || h.WorkerID != "worker-1" || !slices.Equal(h.Plugins, []string{"reference"}) || len(h.Repositories) != 0 {
			t.Fatalf("hello %+v", h)
		}
	}
	for i, c := range []*gateConn{c0, c1} {
		job := []string{"j_a", "j_b"}[i]
		c.lease(t, textLease(job, "a_1", testPolicy("reference"), "hello agent forge"))
		res := c.nextOf(t, wire.TypeResult)
		r := res.Result
		if r.JobID != job || r.AttemptID != "a_1" || r.Outcome != wire.OutcomeSucceeded || r.Output == nil || *r.Output != "HELLO AGENT FORGE" {
			t.Fatalf("result %+v", r)
		}
		if res.Seq == 0 {
			t.Fatal("result without seq")
		}
		c.reply(t, res.Seq, true)
	}
	// After the ack the lane is idle and takes the next lease.
	c0.lease(t, textLease("j_c", "a_2", testPolicy("reference"), "again"))
	res := c0.nextOf(t, wire.TypeResult)
	if r := res.Result; *r.Output != "AGAIN" {
		t.Fatalf("second result %+v", r)
	}
	c0.reply(t, res.Seq, true)
}

func TestLaneReconnectsAfterGateRestart(t *testing.T) {
	g := newFakeGate(t)
	obs, ev := events()
	startWorker(t, Options{Config: laneConfig(t, g, 2), Executors: map[wire.Kind]Executor{wire.KindText: newScriptedExec(upper)}, Observe: obs})
	g.accept()
	g.accept()
	waitEvent(t, ev, EventConnected)
	waitEvent(t, ev, EventConnected)

	g.restart()
	waitEvent(t, ev, EventDisconnected)
	waitEvent(t, ev, EventDisconnected)
	c0, c1 := g.accept(), g.accept()
	if c0.hello.Slot == c1.hello.Slot {
		t.Fatal("two connections for one slot after reconnect")
	}
	c1.lease(t, textLease("j_r", "a_1", testPolicy("reference"), "back"))
	res := c1.nextOf(t, wire.TypeResult)
	if r := res.Result; *r.Output != "BACK" {
		t.Fatalf("result after reconnect %+v", r)
	}
	c1.reply(t, res.Seq, true)
}

func TestHeartbeatsThenRejectCancelsAttempt(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	obs, ev := events()
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}, Observe: obs})
	c := g.accept()
	c.lease(t, textLease("j_hb", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")

	// Acked heartbeats keep the attempt running; each carries the attempt.
	var last uint64
	for i := 0; i < 3; i++ {
		hb := c.next(t)
		if hb.Type != wire.TypeHeartbeat || hb.Heartbeat.JobID != "j_hb" || hb.Heartbeat.AttemptID != "a_1" || hb.Seq <= last {
			t.Fatalf("heartbeat %d: %+v", i, hb)
		}
		last = hb.Seq
		c.reply(t, hb.Seq, true)
	}
	select {
	case <-x.cancelled:
		t.Fatal("attempt cancelled while heartbeats were acked")
	default:
	}
	// The lease expired at Gate: the next heartbeat is rejected.
	hb := c.nextOf(t, wire.TypeHeartbeat)
	c.reply(t, hb.Seq, false)
	if job := recv(t, x.cancelled, "cancellation"); job != "j_hb" {
		t.Fatalf("cancelled %s", job)
	}
	if e := waitEvent(t, ev, EventLeaseLost); e.Code != "heartbeat_expired" {
		t.Fatalf("lease lost code %q", e.Code)
	}
	// No result for a lost lease: once the attempt has stopped the lane
	// says idle, and takes a new one.
	for {
		e := c.next(t)
		if e.Type == wire.TypeHeartbeat {
			continue // a heartbeat in flight before the reject is harmless
		}
		if e.Type != wire.TypeIdle || e.Idle.JobID != "j_hb" || e.Idle.AttemptID != "a_1" {
			t.Fatalf("after a lost lease got %+v", e)
		}
		break
	}
	c.lease(t, textLease("j_next", "a_2", testPolicy("reference"), "next"))
	for {
		e := c.next(t)
		if e.Type == wire.TypeHeartbeat {
			continue // a heartbeat in flight before the reject is harmless
		}
		if e.Type != wire.TypeResult || e.Result.JobID != "j_next" || *e.Result.Output != "NEXT" {
			t.Fatalf("after a lost lease got %+v", e)
		}
		c.reply(t, e.Seq, true)
		break
	}
}

func TestGateCancelCancelsAttempt(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	obs, ev := events()
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}, Observe: obs})
	c := g.accept()
	c.lease(t, textLease("j_c", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	// A cancel for another attempt must not stop this one (it is answered
	// with idle, TestCancelForAttemptNotRunIsAnsweredWithIdle); the one for
	// this attempt must. The lease-lost event shows which one did.
	for _, cc := range []*wire.Cancel{
		{JobID: "j_c", AttemptID: "a_0", Reason: wire.CancelExpired},
		{JobID: "j_other", AttemptID: "a_1", Reason: wire.CancelExpired},
		{JobID: "j_c", AttemptID: "a_1", Reason: wire.CancelExpired},
	} {
		if err := c.Send(wire.Envelope{Type: wire.TypeCancel, Cancel: cc}); err != nil {
			t.Fatal(err)
		}
	}
	recv(t, x.cancelled, "cancellation")
	if e := waitEvent(t, ev, EventLeaseLost); e.Code != "cancel_expired" || e.JobID != "j_c" {
		t.Fatalf("lease lost by %q (%s)", e.Code, e.JobID)
	}
}

func TestSecondLeaseWhileBusyDropsConnection(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()
	c.lease(t, textLease("j_1", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	// Gate must never lease to a busy lane; a Worker that sees it refuses
	// to run two attempts on one lane: it cancels and closes.
	c.lease(t, textLease("j_2", "a_2", testPolicy("reference"), "block"))
	if job := recv(t, x.cancelled, "cancellation"); job != "j_1" {
		t.Fatalf("cancelled %s", job)
	}
	c.waitClosed(t)
	select {
	case l := <-x.started:
		t.Fatalf("second attempt %s started on a busy lane", l.JobID)
	default:
	}
}

func TestConnectionDropCancelsAttemptAndReconnects(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()
	c.lease(t, textLease("j_d", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	close(c.quit) // Gate drops the connection (a takeover closes it the same way)
	recv(t, x.cancelled, "cancellation")
	c2 := g.accept()
	if c2.hello.Slot != 0 {
		t.Fatalf("reconnected slot %d", c2.hello.Slot)
	}
}

func TestShutdownReportsCancelledAttempt(t *testing.T) {
	g := newFakeGate(t)
	g.manualBye.Store(true)
	x := newScriptedExec(upper)
	stop := startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()
	c.lease(t, textLease("j_s", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// goodbye names the attempt still running, before it is cancelled.
	bye := c.nextOf(t, wire.TypeGoodbye)
	if bye.Goodbye.JobID != "j_s" || bye.Goodbye.AttemptID != "a_1" {
		t.Fatalf("goodbye %+v", bye.Goodbye)
	}
	recv(t, x.cancelled, "cancellation")
	c.reply(t, bye.Seq, true)
	res := c.nextOf(t, wire.TypeResult)
	r := res.Result
	if r.Outcome != wire.OutcomeFailed || r.Disposition != wire.DispositionRetryable || r.FailureCode != wire.FailureWorkerShutdown {
		t.Fatalf("shutdown result %+v", r)
	}
	c.reply(t, res.Seq, true)
	c.waitClosed(t)
	recv(t, stopped, "Run to return")
}

func TestUnsupportedKindFailsClosed(t *testing.T) {
	g := newFakeGate(t)
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: newScriptedExec(upper)}})
	c := g.accept()
	task, _ := json.Marshal(wire.CodingTask{RepositoryID: "a", BaseSHA: "0123456789abcdef0123456789abcdef01234567", Instruction: "x"})
	c.lease(t, wire.Envelope{Type: wire.TypeLease, Lease: &wire.Lease{JobID: "j_k", AttemptID: "a_1", Ordinal: 1,
		DeadlineAt: time.Now().Add(time.Minute), Kind: wire.KindCoding, Policy: testPolicy("reference"), Task: task}})
	res := c.nextOf(t, wire.TypeResult)
	if r := res.Result; r.Outcome != wire.OutcomeFailed || r.Disposition != wire.DispositionTerminal || r.FailureCode != wire.FailureUnsupportedKind {
		t.Fatalf("coding lease result %+v", r)
	}
	c.reply(t, res.Seq, true)
}

func TestUnansweredHeartbeatDropsConnection(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	clock := make(chan time.Time, 1)
	base := time.Now()
	clock <- base
	now := func() time.Time { t := <-clock; clock <- t; return t }
	cfg := laneConfig(t, g, 1)
	startWorker(t, Options{Config: cfg, Executors: map[wire.Kind]Executor{wire.KindText: x}, Now: now})
	c := g.accept()
	c.lease(t, textLease("j_u", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	c.next(t) // a heartbeat, left unanswered
	<-clock
	clock <- base.Add(time.Hour) // the reply is now long overdue
	recv(t, x.cancelled, "cancellation")
	c.waitClosed(t)
}

func TestReconnectDelayIsCappedExponential(t *testing.T) {
	w := New(Options{Config: &Config{}, Jitter: func(d time.Duration) time.Duration { return d }})
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for n, ms := range want {
		if got := w.reconnectDelay(n); got != ms*time.Millisecond {
			t.Fatalf("delay(%d) = %v, want %v", n, got, ms*time.Millisecond)
		}
	}
	if w.reconnectDelay(1000) != ReconnectCap {
		t.Fatal("no cap for large n")
	}
	r := New(Options{Config: &Config{}})
	for i := 0; i < 100; i++ {
		if d := r.reconnectDelay(3); d < 400*time.Millisecond || d > 800*time.Millisecond {
			t.Fatalf("jittered delay %v outside [400ms, 800ms]", d)
		}
	}
}

func TestStoppingIdleLaneSaysGoodbyeAndStartsNothing(t *testing.T) {
	g := newFakeGate(t)
	g.manualBye.Store(true)
	x := newScriptedExec(upper)
	obs, ev := events()
	stop := startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}, Observe: obs})
	c := g.accept()
	waitEvent(t, ev, EventConnected)
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	bye := c.nextOf(t, wire.TypeGoodbye)
	if bye.Goodbye.JobID != "" || bye.Goodbye.AttemptID != "" {
		t.Fatalf("idle lane's goodbye names %+v", bye.Goodbye)
	}
	// A lease that crossed the goodbye is not started: the Gate takes it
	// back. The lane waits for the goodbye's answer, then closes.
	c.lease(t, textLease("j_late", "a_1", testPolicy("reference"), "late"))
	c.reply(t, bye.Seq, true)
	c.waitClosed(t)
	recv(t, stopped, "Run to return")
	select {
	case l := <-x.started:
		t.Fatalf("a stopping lane started %s", l.JobID)
	default:
	}
}

// gatedExec blocks "block" jobs until their context ends and then until
// the test lets them return.
type gatedExec struct {
	*scriptedExec
	letGo    chan struct{}
	returned chan struct{}
}

func (x *gatedExec) Execute(ctx context.Context, a *Attempt) Report {
	r := x.scriptedExec.Execute(ctx, a)
	if r.Cancelled {
		<-x.letGo
		close(x.returned)
	}
	return r
}

func TestCancelledLaneSaysIdleOnlyAfterTheAttemptStopped(t *testing.T) {
	g := newFakeGate(t)
	x := &gatedExec{scriptedExec: newScriptedExec(upper), letGo: make(chan struct{}), returned: make(chan struct{})}
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()
	c.lease(t, textLease("j_w", "a_1", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	if err := c.Send(wire.Envelope{Type: wire.TypeCancel, Cancel: &wire.Cancel{JobID: "j_w", AttemptID: "a_1", Reason: wire.CancelExpired}}); err != nil {
		t.Fatal(err)
	}
	recv(t, x.cancelled, "cancellation")
	// While the executor winds down the lane keeps heartbeating (acked
	// here) and says nothing else.
	settle := time.After(200 * time.Millisecond)
wait:
	for {
		select {
		case e := <-c.msgs:
			if e.Type != wire.TypeHeartbeat {
				t.Fatalf("while winding down got %s", e.Type)
			}
			c.reply(t, e.Seq, true)
		case <-settle:
			break wait
		}
	}
	close(x.letGo)
	for {
		e := c.next(t)
		if e.Type == wire.TypeHeartbeat {
			continue
		}
		if e.Type != wire.TypeIdle || e.Idle.JobID != "j_w" || e.Idle.AttemptID != "a_1" {
			t.Fatalf("after the attempt stopped got %+v", e)
		}
		break
	}
	select {
	case <-x.returned:
	default:
		t.Fatal("idle before the executor returned")
	}
}

// A cancel for an attempt the lane does not run (one already reported, one
// it never had, another than its current one) is answered with idle for
// that attempt: the Gate may still count it as the lane's, and only the
// idle lets it lease the lane again. The current attempt runs on.
func TestCancelForAttemptNotRunIsAnsweredWithIdle(t *testing.T) {
	g := newFakeGate(t)
	x := newScriptedExec(upper)
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()
	wantIdle := func(job, attempt string) {
		t.Helper()
		e := c.nextOf(t, wire.TypeIdle)
		if e.Idle.JobID != job || e.Idle.AttemptID != attempt {
			t.Fatalf("idle %+v, want %s/%s", e.Idle, job, attempt)
		}
	}
	cancel := func(job, attempt string) {
		t.Helper()
		if err := c.Send(wire.Envelope{Type: wire.TypeCancel, Cancel: &wire.Cancel{JobID: job, AttemptID: attempt, Reason: wire.CancelExpired}}); err != nil {
			t.Fatal(err)
		}
	}
	c.lease(t, textLease("j_1", "a_1", testPolicy("reference"), "x"))
	r := c.nextOf(t, wire.TypeResult)
	c.reply(t, r.Seq, false) // refused: the Worker is done with it anyway
	cancel("j_1", "a_1")
	wantIdle("j_1", "a_1")
	cancel("j_never", "a_never")
	wantIdle("j_never", "a_never")

	c.lease(t, textLease("j_2", "a_2", testPolicy("reference"), "block"))
	recv(t, x.started, "execution start")
	cancel("j_other", "a_9")
	wantIdle("j_other", "a_9")
	select {
	case j := <-x.cancelled:
		t.Fatalf("a cancel for another attempt stopped %s", j)
	default:
	}
	cancel("j_2", "a_2")
	recv(t, x.cancelled, "cancellation")
	wantIdle("j_2", "a_2")
}

// A result the Gate could not record (reject unavailable: its disk is
// full) is not dropped: the lane sends it again, with a new seq, until it
// is acknowledged, and only then takes its next lease.
func TestUnavailableResultIsSentAgain(t *testing.T) {
	g := newFakeGate(t)
	obs, ev := events()
	startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: newScriptedExec(upper)}, Observe: obs})
	c := g.accept()
	c.lease(t, textLease("j_full", "a_1", testPolicy("reference"), "keep me"))
	var last uint64
	for i := 0; i < 3; i++ {
		res := c.nextOf(t, wire.TypeResult)
		if r := res.Result; r.JobID != "j_full" || r.AttemptID != "a_1" || *r.Output != "KEEP ME" || res.Seq <= last {
			t.Fatalf("result %d: %+v seq %d", i, r, res.Seq)
		}
		last = res.Seq
		c.rejectWith(t, res.Seq, wire.RejectUnavailable)
	}
	res := c.nextOf(t, wire.TypeResult)
	if res.Result.JobID != "j_full" || res.Seq <= last {
		t.Fatalf("result after the refusals: %+v", res)
	}
	c.reply(t, res.Seq, true)
	waitEvent(t, ev, EventReported)
	c.lease(t, textLease("j_next", "a_2", testPolicy("reference"), "next"))
	next := c.nextOf(t, wire.TypeResult)
	if r := next.Result; r.JobID != "j_next" {
		t.Fatalf("next result %+v", r)
	}
	c.reply(t, next.Seq, true) // else the stopping Worker waits out its reply timeout
}

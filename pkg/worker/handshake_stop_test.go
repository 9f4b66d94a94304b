package worker

import (
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// A Worker stopped after its hello went out but before the welcome came
// back still ends the connection with a goodbye: the Gate may already
// have leased the lane (it leases right after welcome), and only the
// goodbye returns that lease to the queue at once.
func TestStopDuringHandshakeSaysGoodbye(t *testing.T) {
	g := newFakeGate(t)
	g.manualBye.Store(true)
	x := newScriptedExec(upper)
	stop := startWorker(t, Options{Config: laneConfig(t, g, 1), Executors: map[wire.Kind]Executor{wire.KindText: x}})
	var c *gateConn
	select {
	case c = <-g.conns: // hello received, not welcomed yet
	case <-time.After(30 * time.Second):
		t.Fatal("no lane connected")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	time.Sleep(100 * time.Millisecond) // the Worker's context has ended
	lane := ident.LaneName(c.hello.WorkerID, c.hello.Slot)
	if err := c.Send(wire.Envelope{Type: wire.TypeWelcome, Welcome: &wire.Welcome{Lane: lane, Generation: "0123456789abcdef0123456789abcdef"}}); err != nil {
		t.Fatalf("welcome: %v", err)
	}
	c.lease(t, textLease("j_1", "a_1", testPolicy("reference"), "x"))
	bye := c.nextOf(t, wire.TypeGoodbye)
	if bye.Goodbye.JobID != "" || bye.Goodbye.AttemptID != "" {
		t.Fatalf("goodbye names %+v", bye.Goodbye)
	}
	c.reply(t, bye.Seq, true)
	c.waitClosed(t)
	recv(t, stopped, "Run to return")
	select {
	case l := <-x.started:
		t.Fatalf("a stopping lane started %s", l.JobID)
	default:
	}
}

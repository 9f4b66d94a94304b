package worker

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/wire"
	"golang.org/x/net/websocket"
)

const testToken = "worker-token-for-tests"

// fakeGate is a scripted Gate: a real HTTP server with a real WebSocket
// endpoint speaking pkg/wire. Each authenticated connection is handed to
// the test, which drives the conversation explicitly.
type fakeGate struct {
	t     *testing.T
	ln    net.Listener
	srv   *http.Server
	conns chan *gateConn
	addr  string
	mu    sync.Mutex
	live  []*gateConn
	// manualBye leaves the Worker's goodbye to the test; by default it is
	// acked at once (and still delivered), so a Worker stopped when a test
	// ends does not wait out its reply timeout.
	manualBye atomic.Bool
}

// gateConn is one accepted lane connection.
type gateConn struct {
	*wire.Conn
	hello wire.Hello
	msgs  chan wire.Envelope // everything the Worker sends after hello
	done  chan struct{}      // closed when the Worker side closed
	quit  chan struct{}      // close to make the handler return (closes the socket)
}

func newFakeGate(t *testing.T) *fakeGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGate{t: t, conns: make(chan *gateConn, 16), addr: ln.Addr().String()}
	g.serve(ln)
	t.Cleanup(g.stop)
	return g
}

func (g *fakeGate) serve(ln net.Listener) {
	g.ln = ln
	mux := http.NewServeMux()
	mux.Handle(wire.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		websocket.Server{Handler: g.handle}.ServeHTTP(w, r)
	}))
	g.srv = &http.Server{Handler: mux}
	go g.srv.Serve(ln)
}

func (g *fakeGate) handle(ws *websocket.Conn) {
	c := &gateConn{Conn: wire.NewConn(ws), msgs: make(chan wire.Envelope, 64), done: make(chan struct{}), quit: make(chan struct{})}
	first, err := c.Receive()
	if err != nil || first.Type != wire.TypeHello {
		return
	}
	c.hello = *first.Hello
	g.mu.Lock()
	g.live = append(g.live, c)
	g.mu.Unlock()
	go func() {
		defer close(c.done)
		for {
			e, err := c.Receive()
			if err != nil {
				return
			}
			if e.Type == wire.TypeGoodbye && !g.manualBye.Load() {
				_ = c.Send(wire.Envelope{Type: wire.TypeAck, Seq: e.Seq, Ack: &wire.Ack{}})
			}
			c.msgs <- e
		}
	}()
	g.conns <- c
	select {
	case <-c.quit:
	case <-c.done:
	}
}

// stop closes the listener and every connection (a Gate crash).
func (g *fakeGate) stop() {
	g.srv.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.live {
		c.Close() // hijacked WebSocket connections outlive srv.Close
	}
	g.live = nil
}

// restart stops the Gate and serves again on the same address.
func (g *fakeGate) restart() {
	g.t.Helper()
	g.stop()
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.t.Fatal(err)
	}
	g.serve(ln)
}

func (g *fakeGate) url() *url.URL { return &url.URL{Scheme: "ws", Host: g.addr} }

// accept waits for the next lane connection and welcomes it.
func (g *fakeGate) accept() *gateConn {
	g.t.Helper()
	select {
	case c := <-g.conns:
		lane := ident.LaneName(c.hello.WorkerID, c.hello.Slot)
		if err := c.Send(wire.Envelope{Type: wire.TypeWelcome, Welcome: &wire.Welcome{Lane: lane, Generation: "0123456789abcdef0123456789abcdef"}}); err != nil {
			g.t.Fatalf("welcome: %v", err)
		}
		return c
	case <-time.After(30 * time.Second):
		g.t.Fatal("no lane connected")
		return nil
	}
}

// next returns the next message the Worker sent on c.
func (c *gateConn) next(t *testing.T) wire.Envelope {
	t.Helper()
	select {
	case e := <-c.msgs:
		return e
	case <-c.done:
		t.Fatal("connection closed while a message was expected")
	case <-time.After(30 * time.Second):
		t.Fatal("no message from the Worker")
	}
	return wire.Envelope{}
}

// nextOf skips heartbeats (acking them) until a message of type typ.
func (c *gateConn) nextOf(t *testing.T, typ wire.Type) wire.Envelope {
	t.Helper()
	for {
		e := c.next(t)
		if e.Type == typ {
			return e
		}
		if e.Type != wire.TypeHeartbeat {
			t.Fatalf("got %s, want %s", e.Type, typ)
		}
		c.reply(t, e.Seq, true)
	}
}

func (c *gateConn) reply(t *testing.T, seq uint64, ok bool) {
	t.Helper()
	e := wire.Envelope{Type: wire.TypeAck, Seq: seq, Ack: &wire.Ack{}}
	if !ok {
		e = wire.Envelope{Type: wire.TypeReject, Seq: seq, Reject: &wire.Reject{Code: wire.RejectExpired}}
	}
	if err := c.Send(e); err != nil {
		t.Fatalf("reply: %v", err)
	}
}

// rejectWith answers seq with reject code.
func (c *gateConn) rejectWith(t *testing.T, seq uint64, code wire.RejectCode) {
	t.Helper()
	if err := c.Send(wire.Envelope{Type: wire.TypeReject, Seq: seq, Reject: &wire.Reject{Code: code}}); err != nil {
		t.Fatalf("reply: %v", err)
	}
}

// waitClosed waits until the Worker closes c.
func (c *gateConn) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the Worker did not close the connection")
	}
}

// testPolicy returns a canonical policy for plugin id with the given
// environment request.
func testPolicy(pluginID string, env ...string) []byte {
	p := policy.Resolve(
		policy.Lifecycle{LeaseTTL: policy.Duration(30 * time.Second), RetryBase: policy.Duration(time.Second), MaxAttempts: 3},
		policy.Execution{PluginID: pluginID, Environment: env,
			PluginTimeout: policy.Duration(time.Minute), CheckTimeout: policy.Duration(time.Minute),
			GitTimeout: policy.Duration(time.Minute), CleanupTimeout: policy.Duration(time.Second),
			PluginOutputBytes: 1 << 20, CheckOutputBytes: 2048, GitOutputBytes: 1 << 20},
	)
	return p.Canonical()
}

func textLease(job, attempt string, pol []byte, input string) wire.Envelope {
	task, _ := json.Marshal(wire.TextTask{Input: input})
	return wire.Envelope{Type: wire.TypeLease, Lease: &wire.Lease{
		JobID: job, AttemptID: attempt, Ordinal: 1, DeadlineAt: time.Now().Add(time.Minute),
		Kind: wire.KindText, Policy: pol, Task: task,
	}}
}

func (c *gateConn) lease(t *testing.T, e wire.Envelope) {
	t.Helper()
	if err := c.Send(e); err != nil {
		t.Fatalf("lease: %v", err)
	}
}

// events collects Worker lane events on a channel.
func events() (func(Event), chan Event) {
	ch := make(chan Event, 256)
	return func(e Event) { ch <- e }, ch
}

func waitEvent(t *testing.T, ch chan Event, kind EventKind) Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-ch:
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

// startWorker runs a Worker against g until the test ends and returns a
// stop function that cancels it and waits for Run to return.
func startWorker(t *testing.T, opt Options) func() {
	t.Helper()
	if opt.Token == "" {
		opt.Token = testToken
	}
	if opt.Jitter == nil {
		opt.Jitter = func(time.Duration) time.Duration { return time.Millisecond }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := New(opt)
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Worker.Run did not return")
		}
	}
	t.Cleanup(stop)
	return stop
}

package worker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Reconnect backoff of a lane: capped exponential with jitter. The delay
// before reconnect attempt n is a uniformly random value in [d/2, d] with
// d = min(ReconnectBase * 2^n, ReconnectCap). n counts consecutive failed
// dials and short sessions; it is reset by a session that reached welcome
// and lasted stableSession, so two processes fighting over one lane (same
// worker id, each taking the lane over) back off instead of flapping.
const (
	ReconnectBase = 100 * time.Millisecond
	ReconnectCap  = 5 * time.Second
	stableSession = 30 * time.Second
)

// Timeouts of the lane's own conversation with Gate.
const (
	dialTimeout    = 10 * time.Second // TCP + WebSocket handshake
	welcomeTimeout = 10 * time.Second // hello → welcome
	sendTimeout    = 10 * time.Second // one message write
	minReplyWait   = 10 * time.Second // floor for an unanswered heartbeat or result
)

// Executor runs one leased attempt of one job kind and says how it ended.
// ctx ends when the lease is lost or the Worker stops; the executor must
// then stop its work and return promptly (the plugin runner's cancel,
// drain and cleanup).
type Executor interface {
	Execute(ctx context.Context, a *Attempt) Report
}

// Attempt is everything an executor is given for one leased attempt.
type Attempt struct {
	Lease *wire.Lease
	// Bind makes one evidence batch durable through the lane. Nil means
	// evidence cannot be bound, so a coding attempt claims no candidate.
	Bind Binder
	// Stages receives the attempt's live-activity stages (nil: none).
	Stages *activity.Tracker
	// Observe receives the attempt's signals for Options.Observe (nil:
	// none); the lane fills in the slot.
	Observe func(Event)
	// Gate is the attempt's bundle channel to the Gate (public-source
	// leases; nil: none, and such a lease fails preparation).
	Gate *GateLink
	// Grant is the attempt's model gateway credential (gateway.go; nil:
	// the Worker serves no providers).
	Grant *gateway.Grant
}

// observe reports e for the attempt's job.
func (a *Attempt) observe(e Event) {
	if a.Observe != nil {
		e.JobID = a.Lease.JobID
		a.Observe(e)
	}
}

// Report is an executor's verdict. Exactly one of Output (success) or Code
// (failure) is meaningful. Cancelled is true when the work stopped because
// ctx ended; the lane then decides what, if anything, to report.
type Report struct {
	Succeeded bool
	Output    string
	Code      string
	Cancelled bool
	// Cause is why the system refused a plugin's start (the step and its
	// errno, no path or argument): the Worker logs it with the failure
	// and never sends it.
	Cause string
	// CandidateSHA (coding) replaces Output on success, with the plugin's
	// self-reported AgentReport when one was negotiated and sent.
	CandidateSHA string
	AgentReport  *wire.AgentReport
	// Usage is the attempt's gateway usage (the lane fills it in on
	// leases that selected wire.UsageV1; executors leave it nil).
	Usage *wire.Usage
}

// Options wires a Worker. Zero values pick production defaults.
type Options struct {
	Config *Config
	Token  string
	// Executors maps a job kind to its executor. A lease of any other kind
	// fails with CodeUnsupportedKind.
	Executors map[wire.Kind]Executor
	Logger    *slog.Logger
	// Dial opens one lane connection; default wire.Dial.
	Dial func(ctx context.Context, gateURL, token string) (*wire.Conn, error)
	// HTTPClient carries repository bundles to and from the Gate
	// (GateLink); default: no proxy, no redirects.
	HTTPClient *http.Client
	// Jitter picks the reconnect delay in [d/2, d]; default uniform random.
	Jitter func(d time.Duration) time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Gateway is the model gateway (OpenGateway; nil: none): every
	// attempt gets a grant on it for as long as its lease lives.
	Gateway *gateway.Gateway
	// Observe, when set, is told about lane state changes and attempt
	// steps (tests use it to wait for a state without sleeping).
	Observe func(Event)
}

// Event is a lane state change or attempt step reported to
// Options.Observe.
type Event struct {
	Slot  int
	Kind  EventKind
	JobID string
	Code  string // failure code or reject code, when there is one
}

// EventKind names a lane state change.
type EventKind string

// Lane and attempt events.
const (
	EventConnected     EventKind = "connected"      // welcome received
	EventDisconnected  EventKind = "disconnected"   // connection ended
	EventLeased        EventKind = "leased"         // a lease arrived
	EventLeaseLost     EventKind = "lease_lost"     // reject, cancel or drop while executing
	EventReported      EventKind = "reported"       // result acknowledged
	EventRejected      EventKind = "result_reject"  // result rejected
	EventPluginStarted EventKind = "plugin_started" // a coding attempt's plugin process is starting
)

// Worker runs Config.Concurrency lanes against one Gate.
type Worker struct {
	opt Options
	log *slog.Logger
	// logs is false when the logger discards every record: an attempt then
	// skips building its per-job logger.
	logs bool
}

// New returns a Worker; it does not connect until Run.
func New(opt Options) *Worker {
	if opt.Dial == nil {
		opt.Dial = wire.Dial
	}
	if opt.HTTPClient == nil {
		opt.HTTPClient = newHTTPClient()
	}
	if opt.Jitter == nil {
		opt.Jitter = func(d time.Duration) time.Duration {
			return d/2 + rand.N(d/2+1)
		}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Observe == nil {
		opt.Observe = func(Event) {}
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{opt: opt, log: log, logs: log.Handler().Enabled(context.Background(), slog.LevelError)}
}

// Run starts every lane and blocks until ctx ends and every lane has
// finished: a lane that is executing when ctx ends cancels its attempt,
// reports what it can, and closes its connection. Run returns nil.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for slot := 0; slot < w.opt.Config.Concurrency; slot++ {
		l := &lane{w: w, slot: slot, name: ident.LaneName(w.opt.Config.ID, slot)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.loop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

// reconnectDelay returns the jittered delay before reconnect attempt n.
func (w *Worker) reconnectDelay(n int) time.Duration {
	d := ReconnectBase
	for i := 0; i < n && d < ReconnectCap; i++ {
		d *= 2
	}
	d = min(d, ReconnectCap)
	return w.opt.Jitter(d)
}

// replyWait is how long a heartbeat or result may stay unanswered before
// the lane gives the connection up.
func (w *Worker) replyWait() time.Duration {
	return max(3*w.opt.Config.HeartbeatInterval, minReplyWait)
}

package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Timeouts of the HTTP server and the Worker endpoint.
const (
	helloTimeout      = 10 * time.Second
	writeTimeout      = 10 * time.Second
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds reading a whole request (headers and body); the
	// Worker endpoint sets its own deadlines on the hijacked connection.
	readTimeout     = 60 * time.Second
	idleTimeout     = 120 * time.Second
	shutdownTimeout = 5 * time.Second
	maxHeaderBytes  = 64 << 10
)

// Gate serves the owner API and the Worker endpoint on one store. Create it
// with New, call Start once, then Serve.
type Gate struct {
	cfg *Config
	sec *Secrets
	st  *store.Store
	log *slog.Logger
	now func() time.Time

	repos       map[string]*RepositoryConfig
	textPolicy  []byte                // canonical policy of text jobs
	repoPolicy  map[string][]byte     // canonical policy of coding jobs per repository
	workerConns []atomic.Int32        // open connections per worker (by index)
	sources     *source.Preparer      // public-source repositories (nil without any)
	pins        basePins              // orders submits and pin updates (maintain.go)
	bundleSlots []workerBundles       // bundle requests in flight per worker (by index, bundles.go)
	sourceStall time.Duration         // sourceStallTimeout (bundles.go); tests shorten it before Serve
	reaper      *supervise.ReaperPool // runs the Preparer's git (nil: none, see Run)

	ready   atomic.Bool
	readied chan struct{} // closed when Start has succeeded
	storage storage       // storage_full (storage.go)
	// unreplicatedLog is when the last unconfirmed write was logged
	// (Unix nanoseconds).
	unreplicatedLog atomic.Int64
	// replicaDown: a write Litestream did not confirm since the last
	// successful test write (replication.go).
	replicaDown atomic.Bool
	lanes       registry
	act         *activity.Store // live activity of current leases, memory only (activity.go)
	// delivery drives automatic deliveries (deliver.go); nil without them.
	delivery *delivery.Runner
	// intakeApp polls the repositories with intake (intake.go); nil
	// without them.
	intakeApp *delivery.App
	due       chan time.Time // earlier wake-up requests for the sweeper

	ctx     context.Context // cancelled when the Gate stops
	stop    context.CancelFunc
	failMu  sync.Mutex
	failErr error
	failed  chan struct{}
	wg      sync.WaitGroup // lane and dispatch goroutines
}

// New builds a Gate. The store must be open; the Gate never closes it.
// now is the clock (time.Now in production).
func New(cfg *Config, sec *Secrets, st *store.Store, log *slog.Logger, now func() time.Time) (*Gate, error) {
	return newGate(cfg, sec, st, log, now, nil)
}

// newGate is New with the reaper pool public-source git runs under (nil:
// none).
func newGate(cfg *Config, sec *Secrets, st *store.Store, log *slog.Logger, now func() time.Time, reaper *supervise.ReaperPool) (*Gate, error) {
	g := &Gate{
		cfg: cfg, sec: sec, st: st, log: log, now: now, reaper: reaper,
		repos:       map[string]*RepositoryConfig{},
		repoPolicy:  map[string][]byte{},
		workerConns: make([]atomic.Int32, len(cfg.Workers)),
		bundleSlots: newBundleSlots(cfg),
		sourceStall: sourceStallTimeout,
		due:         make(chan time.Time, 1),
		failed:      make(chan struct{}),
		readied:     make(chan struct{}),
	}
	g.lanes.lanes = map[string]*lane{}
	g.storage.configured = cfg.FreeSpaceFloorBytes
	if dir, ok, err := store.StateDir(cfg.Database); err == nil && ok {
		g.storage.src = statfsSpace{dir}
	}
	g.act = activity.NewStore(now)
	g.ctx, g.stop = context.WithCancel(context.Background())
	p := policy.Resolve(cfg.Lifecycle, cfg.DefaultExecution)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("gate: default policy: %w", err)
	}
	g.textPolicy = p.Canonical()
	for i := range cfg.Repositories {
		r := &cfg.Repositories[i]
		p := policy.Resolve(cfg.Lifecycle, r.Execution)
		p.Budget = r.Budget.Clone()
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("gate: repository policy: %w", err)
		}
		g.repos[r.ID] = r
		g.repoPolicy[r.ID] = p.Canonical()
	}
	if err := g.openSources(); err != nil {
		return nil, err
	}
	return g, nil
}

// Start prepares the store for serving: every lane recorded as connected by
// an earlier process is marked disconnected, and one expiry sweep runs.
// Only then does /readyz report ready. On a full disk those writes are
// deferred until the Gate leaves storage_full (storage.go), and the Gate
// serves reads meanwhile.
func (g *Gate) Start(ctx context.Context) error {
	g.checkSpace()
	if err := g.startWrites(ctx); err != nil {
		if !g.storageFull(err) {
			return err
		}
		g.storage.deferred.Store(true)
		g.log.Warn("startup writes deferred until storage space is back")
	}
	g.ready.Store(true)
	close(g.readied)
	return nil
}

// startWrites is Start's writing part. A write Litestream did not confirm
// (sync replication) is committed here all the same: the Gate starts with
// its replica down (replication.go) rather than stopping, and sweeps and
// delivers once Litestream confirms writes.
func (g *Gate) startWrites(ctx context.Context) error {
	now := g.now()
	if _, err := g.st.MarkAllLanesDisconnected(ctx, now); err != nil && !g.unreplicated(err) {
		return fmt.Errorf("gate: mark lanes disconnected: %w", err)
	}
	res, err := g.st.Sweep(ctx, now)
	switch {
	case err != nil && g.unreplicated(err):
		return nil // the sweep and deliveries run again once the replica is back
	case err != nil:
		return fmt.Errorf("gate: startup sweep: %w", err)
	}
	g.log.Info("recovered", "expired", len(res.Expired))
	if err := g.resumeDeliveries(); err != nil && !g.unreplicated(err) {
		return fmt.Errorf("gate: resume deliveries: %w", err)
	}
	if res.HasNext {
		g.noteDue(res.NextDue)
	}
	return nil
}

// fail records the first fatal error (a store failure) and stops the Gate.
func (g *Gate) fail(err error) {
	g.failMu.Lock()
	defer g.failMu.Unlock()
	if g.failErr != nil {
		return
	}
	g.failErr = err
	g.ready.Store(false)
	close(g.failed)
}

// storeFailed is the one path for a store error that is not a typed
// rejection: it reports whether err is one. A write that failed for lack
// of space enters storage_full (storage.go); anything else, unless the
// Gate is already stopping (a closed store, a cancelled context), stops
// the Gate. Every caller then answers "unavailable" (storage_full on the
// owner API), and closes a Worker connection unless the Gate survives
// the failure (keepsLane).
func (g *Gate) storeFailed(err error) bool {
	if !storeFailure(err) {
		return false
	}
	if g.storageFull(err) {
		return true
	}
	if g.unreplicated(err) {
		return true
	}
	if !errors.Is(err, store.ErrClosed) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded) && g.ctx.Err() == nil {
		g.fail(err)
	}
	return true
}

// fullErr reports whether err is a storage failure the Gate survives in
// storage_full (storeFailed entered the mode for it).
func (g *Gate) fullErr(err error) bool {
	return g.isFull() && (errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrStorageIO))
}

// keepsLane reports whether a Worker connection whose request failed with
// err stays open: the Gate survives the failure (storage_full, or a write
// Litestream did not confirm), so the lane and the attempt it runs go on
// and the Worker sends the request again later.
func (g *Gate) keepsLane(err error) bool {
	return g.fullErr(err) || errors.Is(err, store.ErrUnreplicated)
}

// storeFailure reports whether err is an unexpected store error (not a
// typed rejection). Such errors stop the Gate (storeFailed) or, for lack
// of space, put it in storage_full.
func storeFailure(err error) bool {
	for _, typed := range []error{store.ErrNotFound, store.ErrStale, store.ErrExpired, store.ErrConflict,
		store.ErrInvalid, store.ErrLaneBusy} {
		if errors.Is(err, typed) {
			return false
		}
	}
	return err != nil
}

// Run opens the store named by cfg, listens on cfg.Listen (logging one
// "listening" event with the bound address), and serves until ctx is
// cancelled or a store failure stops the Gate; it then logs one "store
// counters" event (commits and operations since it opened the store).
// With public sources, their git runs under reapers started from the
// running binary (supervise.Self), which must dispatch supervise.ReaperArg
// first thing in main: a Gate killed mid-fetch leaves no git running.
func Run(ctx context.Context, cfg *Config, sec *Secrets, log *slog.Logger, now func() time.Time) error {
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("gate: open store: %w", err)
	}
	defer st.Close()
	var reaper *supervise.ReaperPool
	if cfg.hasPublicSources() {
		self, err := supervise.Self()
		if err != nil {
			return errors.New("gate: public sources: cannot locate the running binary")
		}
		reaper = supervise.NewReaperPool(self)
		defer reaper.Close()
	}
	g, err := newGate(cfg, sec, st, log, now, reaper)
	if err != nil {
		return err
	}
	if cfg.Delivery != nil {
		tmp, err := deliveryTempDir(cfg.PublicRepositoryRoot)
		if err != nil {
			return errors.New("gate: delivery: cannot create its private directory")
		}
		defer os.RemoveAll(tmp)
		app := g.gitHubApp(tmp)
		if err := g.EnableDelivery(app); err != nil {
			return err
		}
		if len(g.intakeRepos()) > 0 {
			g.intakeApp = app
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return errors.New("gate: cannot listen on the configured address")
	}
	log.Info("listening", "addr", ln.Addr().String())
	err = g.Serve(ctx, ln)
	// Group-commit counters of this run: durable transactions and the
	// writes they carried.
	s := st.Stats()
	log.Info("store counters", "commits", s.Commits, "operations", s.Operations)
	return err
}

// openRetry is how often a Gate whose file system has no room to open
// the store (SQLite's -shm wal-index cannot be created) tries again.
const openRetry = time.Second

// openStore opens the store; while it fails for lack of space (SQLITE_FULL,
// or an I/O error while the state file system is below its floor) it logs
// once and tries again every openRetry until ctx ends (a full disk never
// stops the Gate, DECISIONS 20; it listens once the store is open).
func openStore(ctx context.Context, cfg *Config, log *slog.Logger) (*store.Store, error) {
	logged := false
	for {
		st, err := store.OpenReplicated(ctx, cfg.Database, cfg.replication())
		if err == nil || !openFull(cfg, err) {
			return st, err
		}
		if !logged {
			log.Warn("storage full: no room to open the store, retrying until space is back")
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(openRetry):
		}
	}
}

// openFull reports whether Open's err is the file system's lack of space.
func openFull(cfg *Config, err error) bool {
	if errors.Is(err, store.ErrFull) {
		return true
	}
	dir, ok, derr := store.StateDir(cfg.Database)
	if !errors.Is(err, store.ErrStorageIO) || derr != nil || !ok {
		return false
	}
	sp, serr := store.StatSpace(dir)
	return serr == nil && sp.Free < store.Floor(sp.Total, cfg.FreeSpaceFloorBytes)
}

// Serve runs the HTTP server on ln, performs Start (so /readyz turns ready
// only after the startup sweep), then runs the sweeper until ctx is
// cancelled (nil error) or a store failure occurs (that error). The
// listener is closed on return.
func (g *Gate) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return g.ctx },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	err := g.Start(ctx)
	if err == nil {
		g.wg.Add(1)
		go g.storageLoop()
		g.wg.Add(1)
		go g.sweeper()
		g.wg.Add(1)
		go g.deliveryLoop()
		g.wg.Add(1)
		go g.maintenanceLoop()
		if g.cfg.Replication == store.ReplicationSync {
			g.wg.Add(1)
			go g.replicaLoop()
		}
		if g.intakeApp != nil {
			g.wg.Add(1)
			go g.intakeLoop(g.intakeApp.API, g.intakeApp, g.intakeRepos())
		}
		select {
		case <-ctx.Done():
		case <-g.failed:
		case err = <-serveErr:
			err = fmt.Errorf("gate: serve: %w", err)
		}
	}
	g.ready.Store(false)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	g.stop()
	g.lanes.closeAll()
	g.wg.Wait()
	if g.delivery != nil {
		g.delivery.Wait()
	}
	g.closeSources()
	g.failMu.Lock()
	defer g.failMu.Unlock()
	if g.failErr != nil {
		return fmt.Errorf("gate: stopped after a store failure: %w", g.failErr)
	}
	return err
}

// noteDue asks the sweeper to wake no later than t (a retry becoming due).
func (g *Gate) noteDue(t time.Time) {
	for {
		select {
		case g.due <- t:
			return
		default:
		}
		select {
		case old := <-g.due:
			if old.Before(t) {
				t = old
			}
		default:
		}
	}
}

// sweeper expires overdue attempts every recovery_interval, or earlier when
// a deadline or retry falls due. Idle lanes are woken after a sweep that
// expired something or that ran because something fell due (a retry is
// leasable now). A lease poll tick wakes a few idle lanes in rotation: the
// fallback cadence, bounded so that many idle lanes cost little.
func (g *Gate) sweeper() {
	defer g.wg.Done()
	every := g.cfg.RecoveryInterval.Std()
	next := g.now().Add(every)
	dueWake := false
	timer := time.NewTimer(every)
	defer timer.Stop()
	poll := time.NewTicker(g.cfg.LeasePollInterval.Std())
	defer poll.Stop()
	arm := func(t time.Time) {
		if !t.Before(next) {
			return
		}
		next, dueWake = t, true
		timer.Reset(max(t.Sub(g.now()), 0))
	}
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-g.failed:
			return
		case t := <-g.due:
			arm(t)
		case <-poll.C:
			g.wakeSome(pollWakeLanes)
		case <-timer.C:
			now := g.now()
			if g.storage.hard.Load() || g.storage.deferred.Load() || g.replicaDown.Load() {
				// Writes fail for lack of space, or the replica does not
				// confirm them: no expiry while heartbeats cannot be
				// stored or acknowledged (storage.go, replication.go).
				next, dueWake = now.Add(every), false
				timer.Reset(every)
				continue
			}
			res, err := g.st.Sweep(g.ctx, now)
			if err != nil {
				if g.storageFull(err) || g.unreplicated(err) {
					next, dueWake = now.Add(every), false
					timer.Reset(every)
					continue
				}
				if g.ctx.Err() == nil {
					g.fail(fmt.Errorf("sweep: %w", err))
				}
				return
			}
			for _, e := range res.Expired {
				g.cancelExpired(e)
			}
			g.dropWinding(now)
			if dueWake || len(res.Expired) > 0 {
				g.wakeAll()
			}
			next, dueWake = now.Add(every), false
			timer.Reset(every)
			if res.HasNext {
				arm(res.NextDue)
			}
		}
	}
}

// pollWakeLanes is how many idle lanes one lease poll tick wakes.
const pollWakeLanes = 16

// newID returns 32 random lowercase hex digits.
// newJobID returns a job id in the same 32-hex shape as newID, but its
// first 12 digits are the current Unix time in milliseconds and the other
// 80 bits random: ids of successive jobs sort together, so the store's
// unique index on job ids grows at its end instead of dirtying a random
// page (one more WAL frame in the commit) for every submit.
func newJobID() string { return jobIDAt(time.Now()) }

func jobIDAt(t time.Time) string {
	var b [16]byte
	if _, err := rand.Read(b[6:]); err != nil {
		panic("gate: crypto/rand failed: " + err.Error())
	}
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return hex.EncodeToString(b[:])
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("gate: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

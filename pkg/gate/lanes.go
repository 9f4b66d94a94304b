package gate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// lane is one live Worker connection (one slot). Fields after mu's comment
// are guarded by registry.mu and changed only by the transitions of
// lanestate.go.
type lane struct {
	name       string
	worker     int
	slot       int
	generation string
	pool       string
	plugins    []string
	repos      []string
	pluginSet  map[string]bool
	repoSet    map[string]bool
	registered map[string]*RepositoryConfig // Gate's repositories (read-only): public-source paths for coding leases
	conn       *wire.Conn
	sendMu     sync.Mutex
	leases     wire.LeaseEncoder // checks the lane's policy document once, not per lease
	// activity is the live-activity version selected for this lane's
	// leases ("" when its hello offered none this Gate knows); act is the
	// Gate's activity store (activity.go).
	activity string
	act      *activity.Store
	// usage is the gateway usage version selected for this lane's
	// leases (wire.UsageV1, or "" when its hello did not offer it: the
	// lane's Worker meters nothing, and it is offered no repository with
	// a budget).
	usage string

	// guarded by registry.mu
	state     laneState
	again     bool // a wake arrived while reserved or recording: ask once more
	draining  bool // the Worker said goodbye: lease nothing more
	jobID     string
	attemptID string
	call      chan struct{} // open while a Lease call for the lane is in flight
	// callFailed: a Lease call could not give back what it had to
	// (releaseFailed); a goodbye that waited for it is not acknowledged.
	callFailed bool
	// running: the Worker's goodbye named the held attempt as running.
	running bool
	// windingSince is when the lane started winding down (withdraw).
	windingSince time.Time
}

// leaseRequest names this lane to the store's Lease.
func (l *lane) leaseRequest() store.LeaseRequest {
	return store.LeaseRequest{Lane: l.name, Generation: l.generation, Pool: l.pool, Plugins: l.plugins, Repositories: l.repos}
}

// registry maps lane names to their live connection.
type registry struct {
	connectMu sync.Mutex // serialises ConnectLane + install
	mu        sync.Mutex
	lanes     map[string]*lane
	rr        int // round-robin start for single wakes
	poll      int // rotation position of the lease poll
	order     []*lane
	all       map[*wire.Conn]struct{} // every open connection, hello or not
	done      bool                    // closeAll ran: close newcomers at once
}

// track remembers c until untrack; it reports false (and c should be
// closed) when the Gate is stopping.
func (r *registry) track(c *wire.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	if r.all == nil {
		r.all = map[*wire.Conn]struct{}{}
	}
	r.all[c] = struct{}{}
	return true
}

func (r *registry) untrack(c *wire.Conn) {
	r.mu.Lock()
	delete(r.all, c)
	r.mu.Unlock()
}

// install makes l the live connection for its lane and returns the one it
// replaced (nil if none) with the attempt that one holds but may not have
// started (supersede; nil if none).
func (r *registry) install(l *lane) (old *lane, unstarted *attemptRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.lanes[l.name]
	if old != nil {
		unstarted = old.supersede()
		r.dropOrder(old)
	}
	r.lanes[l.name] = l
	r.order = append(r.order, l)
	return old, unstarted
}

// remove forgets l if it is still the live connection of its lane.
func (r *registry) remove(l *lane) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.close()
	if r.lanes[l.name] == l {
		delete(r.lanes, l.name)
		r.dropOrder(l)
	}
}

func (r *registry) dropOrder(l *lane) {
	for i, x := range r.order {
		if x == l {
			r.order = append(r.order[:i], r.order[i+1:]...)
			return
		}
	}
}

func (r *registry) closeAll() {
	r.mu.Lock()
	r.done = true
	cs := make([]*wire.Conn, 0, len(r.all))
	for c := range r.all {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// send writes one message to the lane with a write deadline. A failed send
// closes the connection; its reader then cleans up.
func (l *lane) send(e wire.Envelope) bool {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if err := l.conn.SendDeadline(e, time.Now().Add(writeTimeout)); err != nil {
		l.conn.Close()
		return false
	}
	return true
}

// sendEncoded writes messages already encoded by wire.Encode*, in one
// write, with a write deadline; err is the encoder's. A failed send closes
// the connection.
func (l *lane) sendEncoded(err error, msgs ...[]byte) bool {
	if err != nil {
		l.conn.Close()
		return false
	}
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	return l.writeHeld(nil, msgs...)
}

// writeHeld is sendEncoded for a caller that holds l.sendMu.
func (l *lane) writeHeld(err error, msgs ...[]byte) bool {
	if err == nil {
		err = l.conn.SendEncodedBatch(time.Now().Add(writeTimeout), msgs...)
	}
	if err != nil {
		l.conn.Close()
		return false
	}
	return true
}

// fits reports whether a job with this pool, plugin and repository may be
// leased to l.
func (l *lane) fits(pool, plugin, repo string) bool {
	return l.pool == pool && l.pluginSet[plugin] && (repo == "" || l.repoSet[repo])
}

// handleWorker authenticates a Worker before the WebSocket upgrade and then
// serves the connection as one lane.
func (g *Gate) handleWorker(w http.ResponseWriter, r *http.Request) {
	p := g.sec.identify(r)
	if p.worker < 0 {
		writeError(w, errNotAWorker)
		return
	}
	if r.Method != http.MethodGet {
		writeError(w, errMethod)
		return
	}
	if !wire.IsUpgrade(r) {
		writeError(w, errNotWebSocket)
		return
	}
	if !g.ready.Load() {
		writeError(w, errNotReady)
		return
	}
	if g.storage.deferred.Load() {
		// The startup writes (lanes of the earlier process marked
		// disconnected) have not run yet: a lane connected now would be
		// marked disconnected by them.
		writeError(w, errNotReadyFull)
		return
	}
	// Concurrency lanes plus as many takeovers in progress.
	limit := int32(2 * g.cfg.Workers[p.worker].Concurrency)
	if g.workerConns[p.worker].Add(1) > limit {
		g.workerConns[p.worker].Add(-1)
		writeError(w, errTooManyConns)
		return
	}
	g.wg.Add(1)
	c, err := wire.Accept(w, r)
	if err != nil {
		g.workerConns[p.worker].Add(-1)
		g.wg.Done()
		return
	}
	// The lane runs on its own goroutine; this handler's goroutine ends.
	go func() {
		defer g.wg.Done()
		defer g.workerConns[p.worker].Add(-1)
		defer c.Close()
		g.serveLane(c, p.worker)
	}()
}

// serveLane runs one connection: hello, welcome, then requests until the
// connection ends.
func (g *Gate) serveLane(c *wire.Conn, worker int) {
	if !g.lanes.track(c) {
		return
	}
	defer g.lanes.untrack(c)
	wc := &g.cfg.Workers[worker]
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	first, err := c.Receive()
	if err != nil || first.Hello == nil {
		return
	}
	h := first.Hello
	if h.WorkerID != wc.ID || h.Slot >= wc.Concurrency {
		_ = c.SendDeadline(wire.Envelope{Type: wire.TypeReject, Reject: &wire.Reject{Code: wire.RejectInvalid}}, time.Now().Add(writeTimeout))
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	usage := wire.SelectUsage(h.UsageVersions)
	repos := h.Repositories
	if usage == "" {
		repos = g.unbudgeted(repos)
	}
	l := &lane{
		name: ident.LaneName(wc.ID, h.Slot), worker: worker, slot: h.Slot, generation: newID(),
		pool: wc.Pool, plugins: h.Plugins, repos: repos,
		pluginSet: set(h.Plugins), repoSet: set(repos), registered: g.repos, conn: c,
		activity: activity.Select(h.ActivityVersions), act: g.act, usage: usage,
	}
	l.reserveAtConnect() // nothing is leased before welcome is out
	if l.plugins == nil {
		l.plugins = []string{}
	}
	if l.repos == nil {
		l.repos = []string{}
	}
	// Recording the generation and installing the connection happen under
	// one lock, so the registry's live connection for a lane is always the
	// store's live generation, even when two takeovers race.
	g.lanes.connectMu.Lock()
	if err := g.st.ConnectLane(g.ctx, l.name, wc.ID, h.Slot, l.generation, g.now()); err != nil {
		g.lanes.connectMu.Unlock()
		g.storeFailed(err)
		return
	}
	old, unstarted := g.lanes.install(l)
	g.lanes.connectMu.Unlock()
	if old != nil {
		old.conn.Close()
		g.log.Info("lane taken over", "lane", l.name)
		// The old connection's lease that may never have started (e.g.
		// the one written after its result's ack to the socket just
		// closed) goes back to the queue before the newcomer's first
		// Lease call, as for a goodbye: it costs no TTL and no attempt.
		if unstarted != nil && !g.reportedActivity(unstarted.jobID, unstarted.attemptID) {
			g.release(old, unstarted.jobID, unstarted.attemptID)
		}
	}
	defer g.disconnect(l)
	if !l.send(wire.Envelope{Type: wire.TypeWelcome, Welcome: &wire.Welcome{Lane: l.name, Generation: l.generation}}) {
		return
	}
	g.log.Info("lane connected", "lane", l.name, "worker_id", wc.ID, "slot", h.Slot)
	g.startLeasing(l)
	for {
		e, err := c.Receive()
		if err != nil {
			return
		}
		if !g.handleRequest(l, e) {
			return
		}
	}
}

func set(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// disconnect forgets l and clears its store record only if it still holds
// this connection's generation (compare-and-clear).
func (g *Gate) disconnect(l *lane) {
	g.lanes.remove(l)
	l.conn.Close()
	g.act.DropConnection(l.name, l.generation)
	// Use a fresh context: the disconnect must be recorded even while the
	// Gate stops; a closed store answers ErrClosed, which is fine.
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if _, err := g.st.DisconnectLane(ctx, l.name, l.generation, g.now()); err != nil {
		g.storeFailed(err)
	}
	g.log.Info("lane disconnected", "lane", l.name)
}

// handleRequest answers one Worker request. It returns false when the
// connection must close.
func (g *Gate) handleRequest(l *lane, e wire.Envelope) bool {
	reply := func(ok bool, ack *wire.Ack, code wire.RejectCode) bool {
		if ok {
			b, err := wire.EncodeAck(e.Seq, ack.DeadlineAt)
			return l.sendEncoded(err, b)
		}
		return l.send(wire.Envelope{Type: wire.TypeReject, Seq: e.Seq, Reject: &wire.Reject{Code: code}})
	}
	now := g.now()
	switch e.Type {
	case wire.TypeHeartbeat:
		if g.storage.hard.Load() {
			// Not stored while writes fail for lack of space; the lease
			// is kept (storage.go).
			return reply(false, nil, wire.RejectUnavailable)
		}
		f := store.Fence{JobID: e.Heartbeat.JobID, AttemptID: e.Heartbeat.AttemptID, Lane: l.name, Generation: l.generation}
		var usage *store.Usage
		if u := e.Heartbeat.Usage; u != nil {
			if l.usage == "" {
				return reply(false, nil, wire.RejectInvalid) // usage the lane never offered
			}
			usage = &store.Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
		}
		deadline, err := g.st.HeartbeatUsage(g.ctx, f, usage, now)
		if err != nil {
			return g.rejectStoreErr(err, reply)
		}
		g.act.Extend(f.JobID, f.AttemptID, l.name, l.generation, deadline)
		return reply(true, &wire.Ack{DeadlineAt: deadline.UTC()}, "")
	case wire.TypeEvidence:
		// Only records that follow the evidence contract, in canonical
		// form, reach the store (pkg/evidence). A batch for an attempt this
		// lane does not hold is stale whatever its content.
		// Checks are the task's checks, in its order, with its argument
		// counts; checks without a candidate must name the job's base.
		// Evidence belongs to coding attempts only: a batch for a text
		// attempt is well-formed but unusable.
		if g.storage.hard.Load() {
			return reply(false, nil, wire.RejectUnavailable) // sent again later (storage.go)
		}
		var opt evidence.Options
		usable := false
		j, err := g.st.Job(g.ctx, e.Evidence.JobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return g.rejectStoreErr(err, reply)
		}
		if err == nil && j.Kind == string(wire.KindCoding) {
			opt.BaseSHA, opt.ArgCounts = j.BaseSHA, j.TestArgCounts
			if opt.ArgCounts == nil {
				opt.ArgCounts = []int{}
			}
			usable = true
		}
		b, err := evidence.ValidateBatch(e.Evidence.Batch, e.Evidence.Records, opt)
		if err != nil || !usable {
			g.lanes.mu.Lock()
			held := l.holds(e.Evidence.JobID, e.Evidence.AttemptID)
			g.lanes.mu.Unlock()
			if !held {
				return reply(false, nil, wire.RejectStale)
			}
			return reply(false, nil, wire.RejectInvalid)
		}
		f := store.Fence{JobID: e.Evidence.JobID, AttemptID: e.Evidence.AttemptID, Lane: l.name, Generation: l.generation}
		// The candidate batch 1 records is the one a success must name;
		// the store checks it when the result arrives.
		candidate := ""
		if e.Evidence.Batch == 1 {
			candidate = evidence.CreatedCandidate(b.Records)
		}
		if _, err := g.st.AddEvidence(g.ctx, f, e.Evidence.Batch, b.Records, candidate, now); err != nil {
			return g.rejectStoreErr(err, reply)
		}
		return reply(true, &wire.Ack{}, "")
	case wire.TypeResult:
		return g.handleResult(l, e.Seq, e.Result, now, reply)
	case wire.TypeActivity:
		g.recordActivity(l, e.Activity)
		return true
	case wire.TypeIdle:
		// The withdrawn (or lost) attempt has stopped on the Worker.
		g.lanes.mu.Lock()
		start := l.workerIdle(e.Idle.JobID, e.Idle.AttemptID)
		g.lanes.mu.Unlock()
		if start {
			g.startLeasing(l)
		}
		return true
	case wire.TypeGoodbye:
		// Nothing more is leased to this lane. A lease it holds but does
		// not run goes back to the queue before the ack, so once the
		// Worker has the ack nothing is left leased to it but what it runs.
		g.lanes.mu.Lock()
		release, inFlight := l.goodbye(attemptRef{e.Goodbye.JobID, e.Goodbye.AttemptID})
		g.lanes.mu.Unlock()
		g.log.Info("lane draining", "lane", l.name)
		// Live activity for the held attempt proves it was started, like
		// a heartbeat or evidence (which the store checks): it keeps its
		// lease until its result or deadline.
		returned := true
		if release != nil && !g.reportedActivity(release.jobID, release.attemptID) {
			returned = g.release(l, release.jobID, release.attemptID)
		}
		if inFlight != nil {
			// A lease being granted to the lane right now is returned
			// by that call (afterLease) before the ack.
			select {
			case <-inFlight:
				g.lanes.mu.Lock()
				returned = returned && !l.callFailed
				g.lanes.mu.Unlock()
			case <-g.ctx.Done():
				returned = false // the Gate stops before that call ended
			}
		}
		if !returned {
			// The ack would say nothing is left leased to the lane.
			return reply(false, nil, wire.RejectUnavailable)
		}
		return reply(true, &wire.Ack{}, "")
	}
	// hello twice or a Gate-only message from a Worker: protocol violation.
	return false
}

// handleResult records a result. A result ends the lane's attempt on the
// Worker whatever the store makes of it. For the lane's current attempt
// the store records it and, in the same transaction, leases the lane its
// next attempt (CompleteAndLease): one commit, and the next lease follows
// the ACK at once; a draining lane's result is recorded alone. Any other
// result (a replay, another attempt) is recorded or refused on its own.
func (g *Gate) handleResult(l *lane, seq uint64, r *wire.Result, now time.Time, reply func(bool, *wire.Ack, wire.RejectCode) bool) bool {
	f := store.Fence{JobID: r.JobID, AttemptID: r.AttemptID, Lane: l.name, Generation: l.generation}
	g.lanes.mu.Lock()
	kind := l.beginResult(r.JobID, r.AttemptID)
	g.lanes.mu.Unlock()
	out, err := outcome(r)
	if err != nil || (l.usage != "" && r.Usage == nil) {
		// Unusable (a code outside the failure table, or no usage on a
		// lane that selected it: the job's budget would lose what the
		// attempt spent): nothing is recorded, but the Worker is done
		// with the attempt all the same.
		return g.refuseResult(l, seq, kind, wire.RejectInvalid)
	}
	if g.storage.hard.Load() {
		// Not stored while writes fail for lack of space: the Worker
		// sends it again (storage.go), and the attempt stays leased.
		return g.refuseResult(l, seq, kind, wire.RejectUnavailable)
	}
	// A public-source candidate counts only once the Gate stored it from
	// the attempt's bundle (bundles.go); otherwise the result is invalid.
	if out.Succeeded && out.CandidateSHA != "" {
		stored, err := g.candidateStored(g.ctx, r.JobID, r.AttemptID, out.CandidateSHA)
		if err != nil {
			code, ok := rejectCode(err)
			sent := g.refuseResult(l, seq, kind, code)
			if !ok {
				g.storeFailed(err)
			}
			return sent && (ok || g.keepsLane(err))
		}
		if !stored {
			return g.refuseResult(l, seq, kind, wire.RejectInvalid)
		}
	}
	if kind == resultAndLease {
		return g.recordAndLease(l, seq, f, out, now, reply)
	}
	c, err := g.st.Complete(g.ctx, f, out, now)
	if kind == resultOnly {
		g.lanes.mu.Lock()
		l.resultDone(nil) // draining: idle, never leased again
		g.lanes.mu.Unlock()
	}
	ok, recorded := false, err == nil
	if err != nil {
		ok = g.rejectStoreErr(err, reply)
	} else {
		g.act.End(r.AttemptID)
		if c.JobStatus == store.JobRetryWait {
			g.noteDue(c.RetryAt)
		}
		ok = reply(true, &wire.Ack{}, "")
	}
	// After the reply, so a lease never precedes it: the winding lane
	// (recording until now) is idle, or asks again for a wake that arrived
	// meanwhile, and a lane that said idle for an attempt the store still
	// held (its Lease calls were refused as busy) may be leased again once
	// that attempt is recorded.
	step := stepNone
	if kind == resultEndsWinding {
		g.lanes.mu.Lock()
		step = l.resultDone(nil)
		g.lanes.mu.Unlock()
	}
	switch {
	case ok && step == stepAskAgain:
		g.startLeasing(l)
	case ok && (kind == resultEndsWinding || (kind == resultOther && recorded)):
		g.wakeLane(l)
	}
	return ok
}

// recordAndLease records the result of the lane's current attempt and
// leases the lane its next one in the same commit.
func (g *Gate) recordAndLease(l *lane, seq uint64, f store.Fence, out store.Outcome, now time.Time, reply func(bool, *wire.Ack, wire.RejectCode) bool) bool {
	var c store.Completion
	var next *store.Lease
	var err error
	if !g.leasing() {
		c, err = g.st.Complete(g.ctx, f, out, now) // storage_full or no replica: nothing new is leased
	} else {
		c, next, err = g.st.CompleteAndLease(g.ctx, f, out, l.leaseRequest(), now)
	}
	if err != nil {
		g.giveBack(l, next, err)
		code, ok := rejectCode(err)
		sent := g.refuseResult(l, seq, resultAndLease, code)
		if !ok {
			g.storeFailed(err)
		}
		return sent && (ok || g.keepsLane(err))
	}
	g.act.End(f.AttemptID)
	if c.JobStatus == store.JobRetryWait {
		g.noteDue(c.RetryAt)
	}
	if next == nil {
		ack, encErr := wire.EncodeAck(seq, time.Time{})
		step, ok := g.idleThenSend(l, encErr, ack)
		if ok && step == stepAskAgain {
			g.startLeasing(l)
		}
		return ok
	}
	g.lanes.mu.Lock()
	step := l.resultDone(next)
	g.lanes.mu.Unlock()
	if step == stepRelease {
		// The connection closed while the result was recorded.
		g.release(l, next.JobID, next.AttemptID)
		reply(true, &wire.Ack{}, "")
		return false
	}
	// The ack and the next lease go out together, in one write. A failed
	// send closes the connection; the new attempt keeps its lease until it
	// expires and is retried.
	ack, err := wire.EncodeAck(seq, time.Time{})
	if err != nil {
		l.conn.Close()
		return false
	}
	lease, err := l.encodeLease(next)
	if err != nil {
		// The result is recorded: acknowledge it, then give up the
		// connection as for any unsendable lease.
		l.sendEncoded(nil, ack)
		l.conn.Close()
		return false
	}
	return l.sendEncoded(nil, ack, lease)
}

// refuseResult answers a result that recorded nothing with reject code. A
// result ends the lane's attempt on the Worker whatever the answer: a lane
// that was running or winding it down (kind) is idle from here on, so no
// answer leaves it busy. The store keeps it from leasing while the attempt
// stays leased (the sweep's expiry wakes it); a withdrawn attempt is
// already expired, so that lane asks for work at once.
func (g *Gate) refuseResult(l *lane, seq uint64, kind resultKind, code wire.RejectCode) bool {
	b, encErr := wire.Encode(wire.Envelope{Type: wire.TypeReject, Seq: seq, Reject: &wire.Reject{Code: code}})
	if kind == resultOther {
		return l.sendEncoded(encErr, b)
	}
	step, sent := g.idleThenSend(l, encErr, b)
	switch {
	case sent && step == stepAskAgain:
		g.startLeasing(l)
	case sent && kind == resultEndsWinding:
		g.wakeLane(l)
	}
	return sent
}

// idleThenSend ends the recording of the lane's result with nothing
// leased next (resultDone) and writes the answer msgs, holding the lane's
// send lock across both: the lane is leasable again at once, but a lease
// another goroutine gets for it meanwhile (a submit's, a wake's) is written
// after the answer, never before it (a Worker takes a lease only once its
// result is answered). encErr is the answer's encoding error.
func (g *Gate) idleThenSend(l *lane, encErr error, msgs ...[]byte) (leaseStep, bool) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	g.lanes.mu.Lock()
	step := l.resultDone(nil)
	g.lanes.mu.Unlock()
	return step, l.writeHeld(encErr, msgs...)
}

// release returns a lease l holds but will not run (the lane is draining,
// gone or taken over) to the queue at once, without consuming an attempt,
// and wakes a lane that fits its job. A refusal (the attempt ran, was
// recorded or expired meanwhile) leaves it to the store's usual course.
// It reports false only when the store failed: the lease may still be
// leased to the lane although it will not run there.
func (g *Gate) release(l *lane, jobID, attemptID string) bool {
	g.act.End(attemptID)
	// A fresh context: a lease must be returned even while the Gate stops.
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	r, err := g.st.Release(ctx, store.Fence{JobID: jobID, AttemptID: attemptID, Lane: l.name, Generation: l.generation}, g.now())
	if err != nil {
		return !g.storeFailed(err)
	}
	g.log.Info("lease returned unstarted", "lane", l.name)
	g.wakeFor(r.Pool, r.PluginID, r.RepositoryID)
	return true
}

// unbudgeted is repos without the repositories whose configuration has
// a budget: what a lane whose Worker meters nothing may be leased. (A job
// submitted while its repository had a budget that the configuration has
// since dropped still carries it in its policy: such a Worker refuses it,
// policy_exceeds_ceiling, or invalid_policy from a Worker older than
// budgets, and never runs it unmetered.)
func (g *Gate) unbudgeted(repos []string) []string {
	out := make([]string, 0, len(repos))
	for _, id := range repos {
		if r := g.repos[id]; r == nil || r.Budget == nil {
			out = append(out, id)
		}
	}
	return out
}

// sendLease pushes a lease the store handed to l.
func (l *lane) sendLease(ls *store.Lease) bool {
	b, err := l.encodeLease(ls)
	return l.sendEncoded(err, b)
}

// encodeLease encodes a lease the store handed to l, selecting the lane's
// live-activity version (tracked from here on, activity.go).
func (l *lane) encodeLease(ls *store.Lease) ([]byte, error) {
	if l.activity != "" {
		l.act.Begin(activity.Lease{JobID: ls.JobID, AttemptID: ls.AttemptID, Ordinal: ls.Ordinal,
			Lane: l.name, Generation: l.generation, Version: l.activity, Deadline: ls.DeadlineAt})
	}
	// The default branch is the one resolved at submit, like the policy:
	// a configuration change never changes a queued job.
	lease := &wire.Lease{
		JobID: ls.JobID, AttemptID: ls.AttemptID, Ordinal: ls.Ordinal,
		DeadlineAt: ls.DeadlineAt.UTC(), Kind: wire.Kind(ls.Kind),
		Policy: ls.Policy, Task: ls.Task, DefaultBranch: ls.DefaultBranch, ActivityVersion: l.activity,
		UsageVersion: l.usage,
	}
	if b := ls.Budget; b != nil && l.usage != "" {
		lease.Budget = &wire.Budget{MaxTokens: b.MaxTokens, MaxRequests: b.MaxRequests}
	}
	leaseSource(ls.PreparedPath, ls.BaseSHA, lease)
	return l.leases.Encode(lease)
}

// rejectStoreErr answers a request the store refused or failed
// (rejectCode); it reports whether the connection stays open. After the
// answer, a store failure stops the Gate unless it survives it
// (keepsLane).
func (g *Gate) rejectStoreErr(err error, reply func(bool, *wire.Ack, wire.RejectCode) bool) bool {
	code, ok := rejectCode(err)
	sent := reply(false, nil, code)
	if !ok {
		g.storeFailed(err)
	}
	return sent && (ok || g.keepsLane(err))
}

// rejectCode maps a store rejection to a wire reject code (ok). Any other
// error is a store failure: unavailable, and the caller stops the Gate
// (storeFailed) and closes the connection (!ok).
func rejectCode(err error) (code wire.RejectCode, ok bool) {
	switch {
	case errors.Is(err, store.ErrExpired):
		return wire.RejectExpired, true
	case errors.Is(err, store.ErrStale), errors.Is(err, store.ErrNotFound):
		return wire.RejectStale, true
	case errors.Is(err, store.ErrConflict):
		return wire.RejectConflict, true
	case errors.Is(err, store.ErrInvalid):
		return wire.RejectInvalid, true
	}
	// ErrLaneBusy never reaches here: only Lease returns it, and no
	// request's store call (Heartbeat, AddEvidence, Complete,
	// CompleteAndLease) does.
	return wire.RejectUnavailable, false
}

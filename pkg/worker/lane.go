package worker

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/0k-lab/agent-forge/pkg/activity"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// lane is one concurrency slot: one connection at a time, one attempt at a
// time. Nothing is shared between lanes except the read-only Worker.
type lane struct {
	w    *Worker
	slot int
	name string
	seq  uint64 // last request seq on the current connection
	// bye is the seq of the goodbye sent on the current connection (0:
	// none yet), byeDone whether the Gate has answered it.
	bye     uint64
	byeDone bool
	// generation is the current connection's (its welcome's).
	generation string
}

// loop connects, serves, and reconnects with backoff until ctx ends.
func (l *lane) loop(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		start := time.Now()
		if l.session(ctx) && time.Since(start) >= stableSession {
			failures = 0
		}
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(l.w.reconnectDelay(failures))
		failures++
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one connection from dial to close and reports whether it
// reached welcome. It returns only after any attempt it started is over.
func (l *lane) session(ctx context.Context) bool {
	log := l.w.log.With("lane", l.name)
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err := l.w.opt.Dial(dctx, l.w.opt.Config.GateURL.String(), l.w.opt.Token)
	cancel()
	if err != nil {
		log.Warn("dial failed")
		return false
	}
	defer conn.Close()
	l.seq, l.bye, l.byeDone = 0, 0, false
	if ctx.Err() != nil {
		return false // stopped while dialling: nothing was said
	}

	hello := &wire.Hello{
		Protocol:     wire.Protocol,
		WorkerID:     l.w.opt.Config.ID,
		Slot:         l.slot,
		Plugins:      l.w.pluginIDs(),
		Repositories: l.w.repositoryIDs(),
		// Live activity (activity.go): Gate selects a version it knows.
		ActivityVersions: activity.Offer(),
		// Gateway usage and budgets (budget.go), with a gateway only.
		UsageVersions: l.w.usageOffer(),
	}
	if err := conn.SendDeadline(wire.Envelope{Type: wire.TypeHello, Hello: hello}, time.Now().Add(sendTimeout)); err != nil {
		log.Warn("hello failed")
		return false
	}
	// Once the hello is out, the Gate may welcome the lane and lease it at
	// once, even if this Worker is stopping: wait for the welcome (bounded)
	// so that a stop ends the session with a goodbye, which returns such a
	// lease to the queue instead of leaving it to expire.
	_ = conn.SetReadDeadline(time.Now().Add(welcomeTimeout))
	first, err := conn.Receive()
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil || first.Type != wire.TypeWelcome || first.Welcome.Lane != l.name {
		log.Warn("no welcome", "type", string(first.Type))
		return false
	}
	l.generation = first.Welcome.Generation
	log.Info("connected")
	l.w.opt.Observe(Event{Slot: l.slot, Kind: EventConnected})
	defer l.w.opt.Observe(Event{Slot: l.slot, Kind: EventDisconnected})

	msgs := make(chan wire.Envelope)
	readerDone := make(chan struct{})
	go func() {
		defer close(msgs)
		for {
			e, err := conn.Receive()
			if err != nil {
				return
			}
			select {
			case msgs <- e:
			case <-readerDone:
				return
			}
		}
	}()
	defer func() {
		close(readerDone)
		conn.Close()
		for range msgs {
		}
	}()

	// The lane is idle here. A stopping lane says goodbye and never starts
	// a lease, even one that arrived first: the Gate takes it back.
	for {
		select {
		case <-ctx.Done():
			l.stop(conn, msgs, log)
			return true
		case e, ok := <-msgs:
			if !ok {
				log.Warn("connection closed")
				return true
			}
			if e.Type != wire.TypeLease {
				// Only a lease may arrive on an idle lane, or a cancel for
				// an attempt this lane does not run (any more): say idle
				// for it, or the Gate may never lease the lane again.
				if e.Type == wire.TypeCancel {
					if sendIdle(conn, e.Cancel.JobID, e.Cancel.AttemptID) != nil {
						return true
					}
					continue
				}
				log.Warn("unexpected message on idle lane", "type", string(e.Type))
				return true
			}
			if ctx.Err() != nil {
				l.stop(conn, msgs, log)
				return true
			}
			if !l.attempt(ctx, conn, msgs, e.Lease) {
				return true
			}
		}
	}
}

// sendGoodbye tells the Gate this lane is stopping; running is the lease
// it still executes (nil: none).
func (l *lane) sendGoodbye(conn *wire.Conn, running *wire.Lease) error {
	l.seq++
	l.bye = l.seq
	bye := &wire.Goodbye{}
	if running != nil {
		bye.JobID, bye.AttemptID = running.JobID, running.AttemptID
	}
	return conn.SendDeadline(wire.Envelope{Type: wire.TypeGoodbye, Seq: l.bye, Goodbye: bye}, time.Now().Add(sendTimeout))
}

// answersGoodbye reports whether e is the Gate's answer to the goodbye,
// and records it.
func (l *lane) answersGoodbye(e wire.Envelope) bool {
	if l.bye == 0 || e.Seq != l.bye || (e.Type != wire.TypeAck && e.Type != wire.TypeReject) {
		return false
	}
	l.byeDone = true
	return true
}

// stop ends an idle lane's session: goodbye (unless an attempt already
// sent it), then its answer, bounded. Once the Gate has answered, nothing
// is leased to this lane any more; a lease that crossed the goodbye was
// taken back by the Gate and is not started.
func (l *lane) stop(conn *wire.Conn, msgs <-chan wire.Envelope, log *slog.Logger) {
	log.Info("stopping")
	if l.bye == 0 {
		if err := l.sendGoodbye(conn, nil); err != nil {
			log.Warn("goodbye not sent")
			return
		}
	}
	timer := time.NewTimer(l.w.replyWait())
	defer timer.Stop()
	for !l.byeDone {
		select {
		case <-timer.C:
			log.Warn("goodbye unanswered")
			return
		case e, ok := <-msgs:
			if !ok {
				return
			}
			l.answersGoodbye(e) // anything else: a lease taken back, a late reply
		}
	}
}

// attempt executes one lease: heartbeats while the executor runs, cancels
// it when the lease is lost or ctx ends, and reports the outcome. It
// returns whether the connection is still usable.
func (l *lane) attempt(ctx context.Context, conn *wire.Conn, msgs <-chan wire.Envelope, lease *wire.Lease) bool {
	w := l.w
	log := w.log
	if w.logs {
		log = w.log.With("lane", l.name, "job", lease.JobID, "attempt", lease.AttemptID)
	}
	log.Info("leased", "ordinal", lease.Ordinal, "kind", string(lease.Kind))
	if lease.DeadlineAt.Sub(w.opt.Now()) <= w.opt.Config.HeartbeatInterval {
		// The lease will likely expire before the first heartbeat: Gate's
		// lease_ttl should be several heartbeat_intervals.
		log.Warn("heartbeat_interval is not shorter than the time left on the lease")
	}
	w.opt.Observe(Event{Slot: l.slot, Kind: EventLeased, JobID: lease.JobID})
	if code := leaseActivityCode(lease); code != "" {
		// Refused before anything runs (activity.go).
		return l.report(ctx, conn, msgs, lease, Report{Code: code}, log)
	}
	if code := w.leaseBudgetCode(lease); code != "" {
		// Refused before anything runs (budget.go).
		return l.report(ctx, conn, msgs, lease, Report{Code: code}, log)
	}

	execCtx, cancelExec := context.WithCancel(context.Background())
	defer cancelExec()
	done := make(chan Report, 1)
	link := newEvidenceLink() // coding evidence batches (coding_lane.go)
	defer link.abort()
	// Live activity: at most activity.MaxEvents stages, so the buffer never
	// fills and the executor never blocks on it.
	acts := make(chan activity.Payload, activity.MaxEvents)
	tr := activity.NewTracker(lease.JobID, lease.AttemptID, lease.ActivityVersion, func(p activity.Payload) {
		select {
		case acts <- p:
		default:
		}
	})
	attempt := &Attempt{Lease: lease, Bind: link.bind, Stages: tr, Observe: func(e Event) {
		e.Slot = l.slot
		w.opt.Observe(e)
	}}
	if lease.BaseSHA != "" {
		attempt.Gate = newGateLink(w.opt.Config.GateURL, w.opt.Token, w.opt.HTTPClient,
			wire.AttemptBinding{Lane: l.name, Generation: l.generation, JobID: lease.JobID, AttemptID: lease.AttemptID})
	}
	// The attempt's model gateway grant lives exactly as long as its
	// lease here: revoked when the executor returns or the lease is lost.
	revoke := func() {}
	var overBudget <-chan struct{} // closed when the gateway refuses past the budget
	if w.opt.Gateway != nil {
		attempt.Grant = w.opt.Gateway.Issue(grantBudget(lease))
		revoke, overBudget = attempt.Grant.Revoke, attempt.Grant.Exceeded()
	}
	defer revoke()
	go func() { done <- w.execute(execCtx, attempt) }()

	ticker := time.NewTicker(w.opt.Config.HeartbeatInterval)
	defer ticker.Stop()
	pending := map[uint64]time.Time{} // unanswered heartbeats by seq
	connOK, lost, stopping := true, false, false
	stop := ctx.Done()
	loseLease := func(code string) {
		if !lost {
			lost = true
			log.Warn("lease lost", "reason", code)
			w.opt.Observe(Event{Slot: l.slot, Kind: EventLeaseLost, JobID: lease.JobID, Code: code})
		}
		revoke()
		cancelExec()
	}
	dropConn := func() {
		if connOK {
			connOK = false
			conn.Close()
		}
		loseLease("connection_lost")
	}

	sendStage := func(p activity.Payload) {
		if !lost && connOK && sendActivity(conn, p) != nil {
			dropConn()
		}
	}

	for {
		select {
		case r := <-done:
			revoke()
			// Stages emitted before the executor returned go out first.
			for n := len(acts); n > 0; n-- {
				sendStage(<-acts)
			}
			if !connOK {
				return false
			}
			if lost {
				// The Gate leases this lane again only once it hears
				// the attempt has stopped.
				return sendIdle(conn, lease.JobID, lease.AttemptID) == nil
			}
			if attempt.Grant != nil && attempt.Grant.BudgetExceeded() {
				// Whatever the executor made of the refusal, the
				// attempt ends here (budget.go).
				r = Report{Code: CodeBudgetExceeded}
			} else if r.Cancelled && stopping && !r.Succeeded {
				r = Report{Code: CodeWorkerShutdown}
			}
			if lease.UsageVersion == wire.UsageV1 {
				r.Usage = wireUsage(attempt.Grant)
			}
			return l.report(ctx, conn, msgs, lease, r, log)
		case <-overBudget:
			overBudget = nil
			if attempt.Grant.Unmetered() {
				log.Warn("a model answer's usage could not be read on a budgeted attempt: counted as spending the budget")
			}
			log.Info("model budget spent: stopping the attempt")
			// The credential dies at once: nothing the attempt still
			// runs reaches the model while the executor winds down.
			revoke()
			cancelExec()
		case <-stop:
			stop = nil
			stopping = true
			log.Info("stopping: cancelling the attempt")
			if connOK && l.sendGoodbye(conn, lease) != nil {
				dropConn()
			}
			cancelExec()
		case p := <-acts:
			sendStage(p)
		case req := <-link.reqs:
			if lost || !connOK {
				link.refuse(req)
				continue
			}
			l.seq++
			if !link.send(conn, lease, l.seq, req) {
				dropConn()
			}
		case <-ticker.C:
			if lost {
				continue
			}
			// Batches the Gate could not record go again with the
			// heartbeat (a closed connection refuses each at once).
			for _, req := range link.resend() {
				l.seq++
				if !link.send(conn, lease, l.seq, req) {
					dropConn()
				}
			}
			if lost {
				continue
			}
			now := w.opt.Now()
			if oldest, ok := oldestPending(pending); ok && now.Sub(oldest) > w.replyWait() {
				log.Warn("heartbeat unanswered")
				dropConn()
				continue
			}
			l.seq++
			pending[l.seq] = now
			hb := wire.Envelope{Type: wire.TypeHeartbeat, Seq: l.seq,
				Heartbeat: &wire.Heartbeat{JobID: lease.JobID, AttemptID: lease.AttemptID}}
			if lease.UsageVersion == wire.UsageV1 {
				// The usage so far: it counts toward the job's budget even
				// if no result follows (budget.go).
				hb.Heartbeat.Usage = wireUsage(attempt.Grant)
			}
			if err := conn.SendDeadline(hb, time.Now().Add(sendTimeout)); err != nil {
				dropConn()
			}
		case e, ok := <-msgs:
			if !ok {
				msgs = nil
				dropConn()
				continue
			}
			switch {
			case l.answersGoodbye(e):
			case e.Type == wire.TypeAck && hasKey(pending, e.Seq):
				delete(pending, e.Seq)
			case e.Type == wire.TypeReject && hasKey(pending, e.Seq):
				delete(pending, e.Seq)
				if e.Reject.Code != wire.RejectUnavailable {
					loseLease("heartbeat_" + string(e.Reject.Code))
				}
			case link.owns(e):
				if code := link.answer(e); code == wire.RejectStale || code == wire.RejectExpired {
					loseLease("evidence_" + string(code))
				}
			case e.Type == wire.TypeCancel:
				if e.Cancel.JobID == lease.JobID && e.Cancel.AttemptID == lease.AttemptID {
					loseLease("cancel_" + string(e.Cancel.Reason))
				} else if connOK && sendIdle(conn, e.Cancel.JobID, e.Cancel.AttemptID) != nil {
					dropConn() // not this lane's attempt: it is not running here
				}
			default:
				log.Warn("unexpected message while executing", "type", string(e.Type))
				msgs = nil
				dropConn()
			}
		}
	}
}

// report sends the attempt's result and waits for Gate's answer. A result
// the Gate could not record (reject unavailable: its disk is full,
// DECISIONS 20) is sent again every heartbeat_interval, with a new seq,
// until it is answered otherwise, a cancel says the attempt is gone, the
// connection ends, or ctx ends (the Worker stops). It returns whether the
// connection is still usable.
func (l *lane) report(ctx context.Context, conn *wire.Conn, msgs <-chan wire.Envelope, lease *wire.Lease, r Report, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) bool {
	w := l.w
	res := &wire.Result{JobID: lease.JobID, AttemptID: lease.AttemptID}
	if lease.UsageVersion == wire.UsageV1 {
		// Metered: an attempt refused before it ran spent nothing.
		res.Usage = r.Usage
		if res.Usage == nil {
			res.Usage = &wire.Usage{}
		}
	}
	if r.Succeeded {
		res.Outcome = wire.OutcomeSucceeded
		if r.CandidateSHA != "" {
			res.CandidateSHA, res.AgentReport = r.CandidateSHA, r.AgentReport
		} else {
			out := r.Output
			res.Output = &out
		}
	} else {
		res.Outcome = wire.OutcomeFailed
		res.Disposition, res.FailureCode = wireFailure(r.Code)
		if r.Cause != "" {
			log.Warn("plugin not started", "code", r.Code, "cause", r.Cause)
		}
	}
	var seq uint64
	send := func() bool {
		l.seq++
		seq = l.seq
		b, err := wire.EncodeResult(seq, res)
		if err == nil {
			err = conn.SendEncoded(b, time.Now().Add(sendTimeout))
		}
		if err != nil {
			log.Warn("result not sent")
			return false
		}
		return true
	}
	if !send() {
		return false
	}
	timer := time.NewTimer(w.replyWait())
	defer timer.Stop()
	var again <-chan time.Time // set while waiting to send the result again
	var stop <-chan struct{}   // ctx.Done() while waiting to send it again
	for {
		select {
		case <-timer.C:
			log.Warn("result unanswered")
			return false
		case <-stop:
			log.Warn("result not recorded: stopping")
			return true
		case <-again:
			again, stop = nil, nil
			if !send() {
				return false
			}
			timer.Reset(w.replyWait())
		case e, ok := <-msgs:
			if !ok {
				log.Warn("connection closed before the result was acknowledged")
				return false
			}
			switch {
			case l.answersGoodbye(e):
			case e.Seq == seq && e.Type == wire.TypeAck:
				log.Info("reported", "outcome", string(res.Outcome), "code", r.Code)
				w.opt.Observe(Event{Slot: l.slot, Kind: EventReported, JobID: lease.JobID, Code: r.Code})
				return true
			case e.Seq == seq && e.Type == wire.TypeReject && e.Reject.Code == wire.RejectUnavailable:
				log.Warn("result not recorded: sending it again")
				timer.Stop()
				again, stop = time.After(w.opt.Config.HeartbeatInterval), ctx.Done()
			case e.Seq == seq && e.Type == wire.TypeReject:
				log.Warn("result rejected", "reason", string(e.Reject.Code))
				w.opt.Observe(Event{Slot: l.slot, Kind: EventRejected, JobID: lease.JobID, Code: string(e.Reject.Code)})
				return true
			case e.Type == wire.TypeCancel:
				// A cancel racing the result: the attempt has stopped.
				if sendIdle(conn, e.Cancel.JobID, e.Cancel.AttemptID) != nil {
					return false
				}
				if again != nil && e.Cancel.JobID == lease.JobID && e.Cancel.AttemptID == lease.AttemptID {
					log.Warn("result not recorded: the lease is gone")
					return true
				}
			case e.Type == wire.TypeAck || e.Type == wire.TypeReject:
				// a late heartbeat reply
			default:
				log.Warn("unexpected message while reporting", "type", string(e.Type))
				return false
			}
		}
	}
}

// sendIdle tells the Gate the attempt (job, attempt) is not running on this
// lane: it stopped after a lost lease, or it never ran here.
func sendIdle(conn *wire.Conn, job, attempt string) error {
	idle := wire.Envelope{Type: wire.TypeIdle, Idle: &wire.Idle{JobID: job, AttemptID: attempt}}
	return conn.SendDeadline(idle, time.Now().Add(sendTimeout))
}

// execute dispatches an attempt to the executor of its kind.
func (w *Worker) execute(ctx context.Context, a *Attempt) Report {
	x, ok := w.opt.Executors[a.Lease.Kind]
	if !ok {
		return Report{Code: CodeUnsupportedKind}
	}
	return x.Execute(ctx, a)
}

func (w *Worker) pluginIDs() []string {
	ids := make([]string, 0, len(w.opt.Config.Plugins))
	for _, p := range w.opt.Config.Plugins {
		ids = append(ids, p.ID)
	}
	sort.Strings(ids)
	return ids
}

// repositoryIDs lists the repositories a lane advertises: none until this
// Worker has a coding executor, so Gate never routes coding jobs
// here.
func (w *Worker) repositoryIDs() []string {
	ids := []string{}
	if _, ok := w.opt.Executors[wire.KindCoding]; !ok {
		return ids
	}
	for _, r := range w.opt.Config.Repositories {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	return ids
}

func oldestPending(p map[uint64]time.Time) (time.Time, bool) {
	var oldest time.Time
	found := false
	for _, t := range p {
		if !found || t.Before(oldest) {
			oldest, found = t, true
		}
	}
	return oldest, found
}

func hasKey(m map[uint64]time.Time, k uint64) bool {
	_, ok := m[k]
	return ok
}

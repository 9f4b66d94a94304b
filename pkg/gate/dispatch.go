package gate

import (
	"encoding/json"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Dispatch is push-based. A lane asks the store for work when it becomes
// idle (welcome, result ACK, the Worker's idle after a cancel), when a submit names a job it fits,
// and on the sweeper's wake-ups (retry due, lease poll fallback). At most
// one Lease call per lane is in flight; a wake that arrives meanwhile makes
// it ask once more, so no job is missed between its SELECT and a submit.

// startLeasing runs l's lease loop; l must be reserved.
func (g *Gate) startLeasing(l *lane) {
	g.wg.Add(1)
	go g.leaseLoop(l)
}

// wakeLane makes l ask for work if it is idle, or ask again if it is
// already asking.
func (g *Gate) wakeLane(l *lane) {
	g.lanes.mu.Lock()
	start := l.wake()
	g.lanes.mu.Unlock()
	if start {
		g.startLeasing(l)
	}
}

// wakeAll wakes every idle lane.
func (g *Gate) wakeAll() {
	g.lanes.mu.Lock()
	var start []*lane
	for _, l := range g.lanes.order {
		if l.wake() {
			start = append(start, l)
		}
	}
	g.lanes.mu.Unlock()
	for _, l := range start {
		g.startLeasing(l)
	}
}

// wakeSome wakes up to n idle lanes, continuing the rotation where the
// previous call stopped.
func (g *Gate) wakeSome(n int) {
	g.lanes.mu.Lock()
	var start []*lane
	total := len(g.lanes.order)
	for i := 0; i < total && len(start) < n; i++ {
		g.lanes.poll = (g.lanes.poll + 1) % total
		if l := g.lanes.order[g.lanes.poll]; l.wake() {
			start = append(start, l)
		}
	}
	g.lanes.mu.Unlock()
	for _, l := range start {
		g.startLeasing(l)
	}
}

// wakeFor wakes one idle lane that fits a new job (round robin), or, when
// none is idle, makes every fitting lane that is asking ask again.
func (g *Gate) wakeFor(pool, plugin, repo string) {
	if l := g.reserveFor(pool, plugin, repo); l != nil {
		g.startLeasing(l)
	}
}

// reserveFor moves one idle lane that fits a job (round robin) to the
// reserved state and returns it; the caller must then ask the store for
// its lease (leaseLoop, or SubmitAndLease followed by afterLease). When no
// fitting lane is idle it returns nil and makes every fitting lane that is
// asking, or recording a result, ask once more; call it (or wakeFor) only
// after the job is committed, or such a lane may ask too early.
func (g *Gate) reserveFor(pool, plugin, repo string) *lane {
	g.lanes.mu.Lock()
	defer g.lanes.mu.Unlock()
	n := len(g.lanes.order)
	for i := 0; i < n; i++ {
		l := g.lanes.order[(g.lanes.rr+i)%n]
		if l.reserve(pool, plugin, repo) {
			g.lanes.rr = (g.lanes.rr + i + 1) % n
			return l
		}
	}
	for _, l := range g.lanes.order {
		l.askAgainFor(pool, plugin, repo)
	}
	return nil
}

// leaseLoop asks the store for one attempt for l and pushes it. It runs
// while l is reserved and leaves it idle or busy.
func (g *Gate) leaseLoop(l *lane) {
	defer g.wg.Done()
	for {
		if !g.leasing() {
			// storage_full, or a replica that does not confirm writes:
			// nothing new is leased; leaving either wakes every idle
			// lane.
			g.lanes.mu.Lock()
			l.leaseFailed()
			g.lanes.mu.Unlock()
			return
		}
		ls, err := g.st.Lease(g.ctx, l.name, l.generation, l.pool, l.plugins, l.repos, g.now())
		if !g.afterLease(l, ls, err) {
			return
		}
	}
}

// afterLease finishes one store lease for l, which is reserved: a lease
// makes it busy and is pushed, or, when the lane closed or is draining
// meanwhile, goes back to the queue; otherwise it becomes idle, unless a
// wake arrived meanwhile, in which case afterLease reports true and the
// caller must ask the store once more. A store failure stops the Gate;
// typed refusals (a fenced generation, a busy lane) only idle it, and drop
// a wake that arrived meanwhile: a lane refused as busy still holds an
// attempt in the store, and its expiry or recorded result wakes the lane
// (a latency-only cost in a rare case, kept deliberately).
func (g *Gate) afterLease(l *lane, ls *store.Lease, err error) (again bool) {
	g.lanes.mu.Lock()
	step := stepNone
	if err != nil {
		l.leaseFailed()
	} else {
		step = l.leaseDone(ls)
	}
	g.lanes.mu.Unlock()
	if err != nil {
		g.giveBack(l, ls, err)
		g.storeFailed(err)
		return false
	}
	switch step {
	case stepSend:
		// A failed send closes the connection; the attempt keeps its
		// lease until it expires and is retried.
		l.sendLease(ls)
	case stepRelease:
		returned := g.release(l, ls.JobID, ls.AttemptID)
		g.lanes.mu.Lock()
		if !returned {
			l.releaseFailed()
		}
		l.callDone()
		g.lanes.mu.Unlock()
	case stepAskAgain:
		return true
	}
	return false
}

// cancelExpired tells the lane running an attempt the sweep expired that
// its lease is gone. The lane winds down and is leased again only once the
// Worker says idle (or sends a result): until then the attempt may still
// be running there.
func (g *Gate) cancelExpired(e store.Expiry) {
	g.act.End(e.AttemptID)
	if e.JobStatus == store.JobRetryWait {
		g.noteDue(e.RetryAt)
	}
	now := g.now()
	g.lanes.mu.Lock()
	l := g.lanes.lanes[e.Lane]
	hit := l != nil && l.generation == e.Generation && l.withdraw(e.AttemptID, now)
	g.lanes.mu.Unlock()
	if hit {
		g.noteDue(now.Add(windingLimit)) // a sweep then checks the wind-down (dropWinding)
		l.send(wire.Envelope{Type: wire.TypeCancel, Cancel: &wire.Cancel{JobID: e.JobID, AttemptID: e.AttemptID, Reason: wire.CancelExpired}})
	}
}

// dropWinding closes every lane that has wound down for windingLimit or
// longer at now and drops its connection: its Worker never said idle for
// the cancelled attempt (nor sent a result), so it would never be leased
// again. The connection's reader then forgets the lane as for any
// disconnect.
func (g *Gate) dropWinding(now time.Time) {
	g.lanes.mu.Lock()
	var drop []*lane
	for _, l := range g.lanes.order {
		if l.overdue(now) {
			drop = append(drop, l)
		}
	}
	g.lanes.mu.Unlock()
	for _, l := range drop {
		g.log.Warn("lane closed: no idle after cancel", "lane", l.name, "limit", windingLimit.String())
		l.conn.Close()
	}
}

// agentReport is the stored (and served) form of a Worker's agent report.
type agentReport struct {
	SelfReported bool     `json:"self_reported"`
	Summary      string   `json:"summary"`
	Changes      []string `json:"changes"`
}

// outcome converts a validated wire result into the store's form. A
// failure must be a row of the closed failure table (code and its
// disposition); anything else is refused with reject invalid.
func outcome(r *wire.Result) (store.Outcome, error) {
	var usage *store.Usage
	if u := r.Usage; u != nil {
		usage = &store.Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
	}
	if r.Outcome == wire.OutcomeFailed {
		if err := wire.CheckFailure(r.FailureCode, r.Disposition); err != nil {
			return store.Outcome{}, err
		}
		return store.Outcome{Disposition: string(r.Disposition), FailureCode: r.FailureCode, Usage: usage}, nil
	}
	o := store.Outcome{Succeeded: true, Output: r.Output, CandidateSHA: r.CandidateSHA, Usage: usage}
	if r.AgentReport != nil {
		b, err := json.Marshal(agentReport{SelfReported: true, Summary: r.AgentReport.Summary, Changes: r.AgentReport.Changes})
		if err != nil {
			return store.Outcome{}, err
		}
		o.AgentReport = b
	}
	return o, nil
}

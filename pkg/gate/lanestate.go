package gate

import (
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// A lane's dispatch state. Every change of it is one of the transitions
// below, each called with registry.mu held; nothing else writes the
// fields they guard (lane.state, again, draining, jobID, attemptID,
// running, call, callFailed, windingSince).
//
//	idle ──wake──▶ reserved ──lease──▶ busy ──result──▶ recording ──▶ busy (next lease) | idle
//	  ▲              │ nothing            │ cancel{expired}
//	  │              ▼                    ▼
//	  └──────────── idle               winding ──idle msg──▶ idle; ──result──▶ recording ──▶ idle
//	                                      │ windingLimit
//	                                      ▼
//	                                    closed
//
// Every answer to a result ends busy: recording → idle when nothing was
// recorded (refused, or unusable), as when nothing was leased next.
// closed is final (the connection ended or was taken over, or the lane
// wound down longer than windingLimit). draining (the
// Worker's goodbye) is a flag, not a state: a draining lane finishes what
// it runs and is never leased again; a lease that reaches a draining or
// closed lane, or that it holds but did not start, is returned to the
// queue (store.Release) without consuming an attempt.
//
// call is open from the moment a lane is reserved until its Lease call has
// ended, including the release of a lease it could not take; a goodbye
// waits for it, so its ack follows every such release.
type laneState int

const (
	laneIdle      laneState = iota // may be leased
	laneReserved                   // one Lease call for it is in flight
	laneBusy                       // runs attempt (jobID, attemptID)
	laneRecording                  // its result for (jobID, attemptID) is being recorded
	laneWinding                    // (jobID, attemptID) was withdrawn; the Worker has not said idle yet
	laneClosed                     // the connection is gone
)

// attemptRef names one attempt.
type attemptRef struct{ jobID, attemptID string }

func (l *lane) holding(job, attempt string) bool {
	return l.jobID == job && l.attemptID == attempt
}

func (l *lane) hold(job, attempt string, s laneState) {
	l.state, l.jobID, l.attemptID, l.running = s, job, attempt, false
}

// reserveAtConnect makes a new lane, not yet registered, reserved: its
// first Lease call follows the welcome.
func (l *lane) reserveAtConnect() {
	l.enterReserved()
}

func (l *lane) enterReserved() {
	l.state, l.call = laneReserved, make(chan struct{})
}

// callDone ends the lane's Lease call (see call).
func (l *lane) callDone() {
	if l.call != nil {
		close(l.call)
		l.call = nil
	}
}

// releaseFailed records that a lease the lane's Lease call had to give back
// could not be returned (a store failure): the goodbye waiting for that
// call must not be acknowledged. Call it before callDone.
func (l *lane) releaseFailed() {
	l.callFailed = true
}

func (l *lane) becomeIdle() {
	if l.state != laneClosed {
		l.hold("", "", laneIdle)
	}
	l.again = false
}

// wake asks an idle lane to lease (true: the caller starts its lease
// loop), or one that is asking or recording to ask once more.
func (l *lane) wake() bool {
	switch {
	case l.draining:
	case l.state == laneIdle:
		l.enterReserved()
		return true
	case l.state == laneReserved, l.state == laneRecording:
		l.again = true
	}
	return false
}

// reserve moves an idle lane that fits a job to reserved.
func (l *lane) reserve(pool, plugin, repo string) bool {
	if l.state != laneIdle || l.draining || !l.fits(pool, plugin, repo) {
		return false
	}
	l.enterReserved()
	return true
}

// askAgainFor makes a lane that is asking or recording and fits a job ask
// once more (the job committed after its store read).
func (l *lane) askAgainFor(pool, plugin, repo string) {
	if (l.state == laneReserved || l.state == laneRecording) && l.fits(pool, plugin, repo) {
		l.again = true
	}
}

// leaseStep is what the caller of leaseDone must do next.
type leaseStep int

const (
	stepNone     leaseStep = iota
	stepSend               // push the lease to the Worker
	stepAskAgain           // ask the store once more
	stepRelease            // return the lease to the queue: the lane cannot take it
)

// leaseDone ends one Lease call of a reserved lane: ls is what the store
// granted (nil: nothing, or a typed refusal). After stepRelease the caller
// releases ls and then calls callDone.
func (l *lane) leaseDone(ls *store.Lease) leaseStep {
	switch {
	case ls != nil && (l.state == laneClosed || l.draining):
		l.becomeIdle()
		return stepRelease
	case ls != nil:
		l.hold(ls.JobID, ls.AttemptID, laneBusy)
		l.again = false
		l.callDone()
		return stepSend
	case l.again && l.state == laneReserved && !l.draining:
		l.again = false
		return stepAskAgain
	}
	l.becomeIdle()
	l.callDone()
	return stepNone
}

// leaseFailed ends a Lease call the store refused or failed: the lane is
// idle.
func (l *lane) leaseFailed() {
	if l.state == laneReserved {
		l.becomeIdle()
	}
	l.callDone()
}

// resultKind says how a result from the lane must be recorded.
type resultKind int

const (
	resultOther       resultKind = iota // not the lane's attempt: record or refuse it alone
	resultAndLease                      // the lane's attempt: record it and lease the next in one commit
	resultOnly                          // the lane's attempt, draining: record it, lease nothing
	resultEndsWinding                   // the withdrawn attempt: the Worker is idle; the store refuses it
)

// beginResult classifies a result for (job, attempt). A result means the
// Worker has stopped that attempt, whatever the store makes of it.
func (l *lane) beginResult(job, attempt string) resultKind {
	if !l.holding(job, attempt) {
		return resultOther
	}
	switch l.state {
	case laneBusy:
		l.state, l.again = laneRecording, false
		if l.draining {
			return resultOnly
		}
		return resultAndLease
	case laneWinding:
		// Recording until the result is answered (resultDone), so that
		// no lease overtakes the answer.
		l.state, l.again = laneRecording, false
		return resultEndsWinding
	}
	return resultOther
}

// resultDone ends the recording of the lane's result: next is the lease
// granted in the same commit (nil: none, or nothing was recorded). The
// step is stepSend (push next with the ack), stepRelease (the lane closed
// meanwhile: return next to the queue), stepAskAgain (start a lease loop)
// or stepNone.
func (l *lane) resultDone(next *store.Lease) leaseStep {
	if l.state != laneRecording {
		if next != nil {
			return stepRelease
		}
		return stepNone
	}
	if next != nil {
		l.hold(next.JobID, next.AttemptID, laneBusy)
		l.again = false
		return stepSend
	}
	again := l.again
	l.becomeIdle()
	if again && l.wake() {
		return stepAskAgain
	}
	return stepNone
}

// withdraw moves a lane running an attempt the sweep expired to winding
// at now (true: send it cancel). A lane recording that attempt's result is
// already done with it.
func (l *lane) withdraw(attempt string, now time.Time) bool {
	if l.state != laneBusy || l.attemptID != attempt {
		return false
	}
	l.state, l.windingSince = laneWinding, now
	return true
}

// overdue reports whether the lane has wound down for windingLimit or
// longer at now; such a lane is closed (the caller drops its connection).
func (l *lane) overdue(now time.Time) bool {
	if l.state != laneWinding || now.Sub(l.windingSince) < windingLimit {
		return false
	}
	l.close()
	return true
}

// workerIdle handles the Worker's idle for (job, attempt): a lane that
// runs it or winds it down is idle again. It reports whether the caller
// must start a lease loop.
func (l *lane) workerIdle(job, attempt string) bool {
	if (l.state != laneBusy && l.state != laneWinding) || !l.holding(job, attempt) {
		return false
	}
	l.becomeIdle()
	return l.wake()
}

// goodbye marks the lane draining. running is the attempt the Worker says
// it executes (zero: none). An attempt the lane holds that the Worker does
// not run was not started: goodbye returns it for release (the store
// refuses one that was). inFlight (nil: none) is the lane's Lease call in
// progress, which will release what it grants; the caller waits for it
// before answering. A repeated goodbye changes nothing: the first one
// already returned what the lane did not run.
func (l *lane) goodbye(running attemptRef) (release *attemptRef, inFlight <-chan struct{}) {
	if l.draining {
		return nil, nil
	}
	l.draining, l.again = true, false
	if l.call != nil {
		inFlight = l.call
	}
	if l.state != laneBusy && l.state != laneWinding {
		return nil, inFlight
	}
	if l.holding(running.jobID, running.attemptID) {
		l.running = true // started, by the Worker's word: never returned
		return nil, inFlight
	}
	held := attemptRef{l.jobID, l.attemptID}
	busy := l.state == laneBusy
	l.becomeIdle()
	if busy {
		return &held, inFlight
	}
	return nil, inFlight // withdrawn: the store has already expired it
}

// close is final: the connection ended or was taken over.
func (l *lane) close() {
	l.state, l.again = laneClosed, false
}

// supersede closes a lane taken over by a newer connection of its slot
// and returns the attempt it holds but may not have started (nil: none),
// which the caller returns to the queue as a goodbye does: the store
// refuses one the Worker heartbeated or sent evidence for, and the caller
// keeps one it reported live activity for. An attempt a goodbye named as
// running is kept. A lease being granted to the lane or recorded with its
// result right now is returned by that call (leaseDone and resultDone see
// the lane closed); a withdrawn attempt is already expired.
func (l *lane) supersede() *attemptRef {
	var held *attemptRef
	if l.state == laneBusy && !l.running {
		held = &attemptRef{l.jobID, l.attemptID}
	}
	l.close()
	return held
}

// holds reports whether the lane runs (job, attempt) (evidence is taken
// only for it).
func (l *lane) holds(job, attempt string) bool {
	return l.state == laneBusy && l.holding(job, attempt)
}

// windingLimit bounds how long a lane may wind down: a Worker that has not
// said idle (or sent a result) this long after the cancel is not going to.
// The sweeper then closes the lane and drops its connection (dropWinding);
// the Worker's lane reconnects only once its executor has returned, so the
// limit never lets two attempts overlap on one Worker lane.
const windingLimit = time.Minute

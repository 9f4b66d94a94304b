package gate

import (
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

var at0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func fitLane() *lane {
	return &lane{pool: "p", pluginSet: map[string]bool{"x": true}, repoSet: map[string]bool{}}
}

// The transitions that keep a lane from being leased while the Worker is
// not ready for it.
func TestLaneTransitions(t *testing.T) {
	ls := &store.Lease{JobID: "j1", AttemptID: "a1"}
	next := &store.Lease{JobID: "j2", AttemptID: "a2"}

	l := fitLane()
	if !l.wake() || l.state != laneReserved || l.leaseDone(ls) != stepSend || !l.holds("j1", "a1") {
		t.Fatalf("idle → reserved → busy: %+v", l)
	}
	if l.wake() || l.reserve("p", "x", "") {
		t.Fatal("a busy lane was woken or reserved")
	}
	// Expiry winds it down; nothing leases it until the Worker's idle.
	if !l.withdraw("a1", at0) || l.state != laneWinding || l.wake() || l.reserve("p", "x", "") {
		t.Fatalf("winding lane: %+v", l)
	}
	if l.workerIdle("j1", "other") || l.state != laneWinding {
		t.Fatal("idle for another attempt ended the wind-down")
	}
	if !l.workerIdle("j1", "a1") || l.state != laneReserved {
		t.Fatalf("idle after the wind-down: %+v", l)
	}

	// A result while winding ends it too (the store refuses the result).
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	l.withdraw("a1", at0)
	if k := l.beginResult("j1", "a1"); k != resultEndsWinding || l.state != laneRecording || l.reserve("p", "x", "") {
		t.Fatalf("result while winding: %v %+v", k, l)
	}
	if l.resultDone(nil) != stepNone || l.state != laneIdle {
		t.Fatalf("answered result while winding: %+v", l)
	}

	// Recording: the next lease goes out with the ack; a wake meanwhile
	// makes it ask again when nothing was granted.
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	if l.beginResult("j1", "a1") != resultAndLease || l.withdraw("a1", at0) {
		t.Fatal("recording lane")
	}
	if l.resultDone(next) != stepSend || !l.holds("j2", "a2") {
		t.Fatalf("next lease: %+v", l)
	}
	l.beginResult("j2", "a2")
	l.wake()
	if l.resultDone(nil) != stepAskAgain || l.state != laneReserved {
		t.Fatalf("wake while recording: %+v", l)
	}

	// Goodbye: a held lease the Worker does not run is released; the lane
	// is never leased again; a lease granted meanwhile is released.
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	if r, _ := l.goodbye(attemptRef{}); r == nil || *r != (attemptRef{"j1", "a1"}) || l.state != laneIdle {
		t.Fatalf("goodbye with an unstarted lease: %v %+v", r, l)
	}
	if l.wake() || l.reserve("p", "x", "") {
		t.Fatal("a draining lane was woken")
	}
	l = fitLane()
	l.wake()
	l.goodbye(attemptRef{})
	if l.leaseDone(ls) != stepRelease || l.state != laneIdle {
		t.Fatalf("lease granted to a draining lane: %+v", l)
	}
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	if r, _ := l.goodbye(attemptRef{"j1", "a1"}); r != nil || !l.holds("j1", "a1") {
		t.Fatal("goodbye released the running attempt")
	}
	if l.beginResult("j1", "a1") != resultOnly || l.resultDone(nil) != stepNone || l.state != laneIdle {
		t.Fatalf("draining lane's result: %+v", l)
	}

	// A lane that closes while recording gives the granted lease back.
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	l.beginResult("j1", "a1")
	l.close()
	if l.resultDone(next) != stepRelease || l.state != laneClosed {
		t.Fatalf("closed while recording: %+v", l)
	}
	l = fitLane()
	l.wake()
	l.close()
	if l.leaseDone(ls) != stepRelease || l.wake() {
		t.Fatal("closed while reserved")
	}
}

// A goodbye while the lane's Lease call is in flight hands the caller that
// call to wait for; it ends only after the release of what it granted. A
// repeated goodbye changes nothing.
func TestGoodbyeWaitsForTheLeaseCall(t *testing.T) {
	ls := &store.Lease{JobID: "j1", AttemptID: "a1"}
	l := fitLane()
	l.wake()
	_, inFlight := l.goodbye(attemptRef{})
	if inFlight == nil {
		t.Fatal("no lease call to wait for")
	}
	if l.leaseDone(ls) != stepRelease {
		t.Fatal("lease granted to a draining lane was not released")
	}
	select {
	case <-inFlight:
		t.Fatal("lease call ended before its release")
	default:
	}
	l.callDone()
	<-inFlight

	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	if r, w := l.goodbye(attemptRef{"j1", "a1"}); r != nil || w != nil {
		t.Fatalf("goodbye of a running lane: %v %v", r, w)
	}
	if r, w := l.goodbye(attemptRef{}); r != nil || w != nil || !l.holds("j1", "a1") {
		t.Fatalf("a second goodbye released the running attempt: %v %+v", r, l)
	}
}

// A lane winding down is closed once it has done so for windingLimit; one
// that said idle in time, or is busy, is not.
func TestWindingLaneOverdue(t *testing.T) {
	ls := &store.Lease{JobID: "j1", AttemptID: "a1"}
	l := fitLane()
	l.wake()
	l.leaseDone(ls)
	if l.overdue(at0.Add(2 * windingLimit)) {
		t.Fatal("a busy lane was overdue")
	}
	l.withdraw("a1", at0)
	if l.overdue(at0.Add(windingLimit-time.Nanosecond)) || l.state != laneWinding {
		t.Fatalf("closed before the limit: %+v", l)
	}
	if !l.overdue(at0.Add(windingLimit)) || l.state != laneClosed || l.wake() || l.workerIdle("j1", "a1") {
		t.Fatalf("overdue lane not closed: %+v", l)
	}
}

// A takeover hands back the attempt the old lane holds but may not have
// started; it keeps one its goodbye named as running, and leaves what is
// being leased or recorded, and what was withdrawn, to their own paths.
func TestSupersede(t *testing.T) {
	ls := &store.Lease{JobID: "j1", AttemptID: "a1"}
	l := fitLane()
	l.wake()
	l.leaseDone(ls)
	if r := l.supersede(); r == nil || *r != (attemptRef{"j1", "a1"}) || l.state != laneClosed {
		t.Fatalf("busy lane taken over: %v %+v", r, l)
	}
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	l.goodbye(attemptRef{"j1", "a1"})
	if r := l.supersede(); r != nil {
		t.Fatalf("the attempt the goodbye named was handed back: %v", r)
	}
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	l.beginResult("j1", "a1")
	if r := l.supersede(); r != nil || l.resultDone(&store.Lease{JobID: "j2", AttemptID: "a2"}) != stepRelease {
		t.Fatalf("recording lane taken over: %v %+v", r, l)
	}
	l = fitLane()
	l.wake()
	l.leaseDone(ls)
	l.withdraw("a1", at0)
	if r := l.supersede(); r != nil {
		t.Fatalf("withdrawn attempt handed back: %v", r)
	}
	l = fitLane()
	l.wake()
	if r := l.supersede(); r != nil || l.leaseDone(ls) != stepRelease {
		t.Fatalf("reserved lane taken over: %v %+v", r, l)
	}
}

package activity

import (
	"sync"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Tracker turns one attempt's pipeline signals into at most MaxEvents
// strictly advancing stages. A nil *Tracker, or one created without a
// selected version, does nothing. Methods are safe for concurrent use;
// emit is called with the Tracker's lock held, so events reach it in
// order, and it must not block or call back into the Tracker.
type Tracker struct {
	mu      sync.Mutex
	base    Payload // identity and version; Stage unused
	emit    func(Payload)
	enabled bool
	rank    int  // rank of the last emitted stage
	sent    int  // events emitted
	batch   bool // a non-empty check batch is running
}

// NewTracker returns the tracker of one attempt. version is the lease's
// selected activity version: "" (not selected) or a version this build
// does not know gives a tracker that never emits.
func NewTracker(jobID, attemptID, version string, emit func(Payload)) *Tracker {
	return &Tracker{
		base:    Payload{JobID: jobID, AttemptID: attemptID, Version: version},
		emit:    emit,
		enabled: emit != nil && Known(version),
	}
}

// Enabled reports whether the tracker may emit.
func (t *Tracker) Enabled() bool { return t != nil && t.enabled }

// Progress maps a validated plugin progress stage: started → analyzing,
// working → editing, finalizing → no change. The frame's text is not an
// argument on purpose.
func (t *Tracker) Progress(s plugin.Stage) {
	switch s {
	case plugin.StageStarted:
		t.advance(StageAnalyzing, nil)
	case plugin.StageWorking:
		t.advance(StageEditing, nil)
	}
}

// ChecksStarted is called before the first of n declared checks runs. A
// non-empty batch moves to testing; an empty one changes nothing.
func (t *Tracker) ChecksStarted(n int) {
	if n > 0 {
		t.advance(StageTesting, func() bool { t.batch = true; return true })
	}
}

// ChecksEnded is called once the check batch is over, passed or stopped
// at a failure. After a non-empty batch it moves to preparing_result.
func (t *Tracker) ChecksEnded() {
	t.advance(StagePreparingResult, func() bool {
		ran := t.batch
		t.batch = false
		return ran
	})
}

// advance emits s if it is past the current stage and the budget allows.
// gate, when set, runs first under the lock and may veto the stage.
func (t *Tracker) advance(s Stage, gate func() bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if gate != nil && !gate() {
		return
	}
	if !t.enabled || t.sent >= MaxEvents || s.Rank() <= t.rank {
		return
	}
	t.rank = s.Rank()
	t.sent++
	p := t.base
	p.Stage = s
	t.emit(p)
}

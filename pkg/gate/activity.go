package gate

import "github.com/0k-lab/agent-forge/pkg/wire"

// Live activity (live_activity/v1, pkg/activity). A lane whose hello
// offers a version this Gate knows gets it selected in every lease
// (lane.sendLease), and the lease is tracked in g.act from then on. An
// activity message is recorded only for the exact job, attempt, lane and
// connection generation of that lease, with the selected version, before
// its current deadline (heartbeats extend it), and only when the stage
// advances; anything else is dropped without an answer. Entries go when
// the result is accepted, the lease is cancelled by an expiry sweep, or the
// connection closes. Nothing of it is ever written to the store; the owner
// reads it through the debug viewer (GET /v1/debug/jobs/{id}/activity).

// recordActivity records one activity message received on l.
func (g *Gate) recordActivity(l *lane, p *wire.Activity) {
	if _, err := g.act.Record(l.name, l.generation, *p); err != nil {
		g.log.Debug("activity dropped", "lane", l.name, "reason", err.Error())
	}
}

// reportedActivity reports whether the Gate recorded live activity for the
// attempt (it was started).
func (g *Gate) reportedActivity(jobID, attemptID string) bool {
	for _, e := range g.act.Job(jobID) {
		if e.AttemptID == attemptID {
			return true
		}
	}
	return false
}

package gate

import (
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// A write Litestream did not confirm (sync replication, DECISIONS 20) is
// in the local database but was not acknowledged: the store answers it
// store.ErrUnreplicated, the Gate answers "unavailable" and goes on. From
// the first such write until a test write is confirmed again
// (replicaLoop) the replica is "down":
//
//   - Worker connections stay open (keepsLane): heartbeats, evidence and
//     results answer reject{unavailable}, the Worker keeps its lease and
//     sends them again, and once Litestream is back they are taken (the
//     store took them already; the repeat is a replay it acknowledges);
//   - nothing new is leased (an attempt started now could report nothing),
//     deliveries are not picked up and the expiry sweep pauses; a lease
//     granted in the write that found the replica down is given back
//     (giveBack) rather than held by a lane that never got it;
//   - once a test write is confirmed every idle lane is woken and a sweep
//     runs.

// unreplicatedLogEvery spaces the warnings about writes Litestream did not
// confirm.
const unreplicatedLogEvery = 10 * time.Second

// replicaCheckEvery is how often a Gate whose replica is down tries a
// confirmed test write.
const replicaCheckEvery = 250 * time.Millisecond

// unreplicated reports whether err is a write Litestream did not confirm
// and, if so, marks the replica down (warning at most every
// unreplicatedLogEvery).
func (g *Gate) unreplicated(err error) bool {
	if !errors.Is(err, store.ErrUnreplicated) {
		return false
	}
	g.replicaDown.Store(true)
	now := time.Now().UnixNano()
	if last := g.unreplicatedLog.Load(); now-last >= int64(unreplicatedLogEvery) && g.unreplicatedLog.CompareAndSwap(last, now) {
		// The reason is the store's fixed text (a route, a status code).
		g.log.Warn("the replica did not confirm a write: writes answered unavailable until Litestream does", "reason", err.Error())
	}
	return true
}

// leasing reports whether new attempts may be leased: not in storage_full
// and not while the replica is down.
func (g *Gate) leasing() bool { return !g.isFull() && !g.replicaDown.Load() }

// giveBack returns to the queue a lease the store granted l in a write
// Litestream did not confirm (the store hands it back with err): it is
// not sent, and a lane left holding it in the store would be leased
// nothing more until it expired, which would cost the job an attempt.
func (g *Gate) giveBack(l *lane, ls *store.Lease, err error) {
	if ls != nil && g.unreplicated(err) {
		// Committed here even when Litestream does not confirm it either.
		g.release(l, ls.JobID, ls.AttemptID)
	}
}

// replicaLoop ends a replica outage (sync replication only): while the
// replica is down it tries a test write every replicaCheckEvery, and once
// Litestream confirms one it leases, sweeps and delivers again.
func (g *Gate) replicaLoop() {
	defer g.wg.Done()
	t := time.NewTicker(replicaCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-g.failed:
			return
		case <-t.C:
			if !g.replicaDown.Load() {
				continue
			}
			if err := g.st.Probe(g.ctx); err != nil {
				g.storeFailed(err)
				continue
			}
			g.replicaDown.Store(false)
			g.log.Info("the replica confirms writes again")
			g.noteDue(g.now())
			g.wakeAll()
		}
	}
}

package gate

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// storage_full (DECISIONS 20): below the free-space floor of the state
// file system, or after a write SQLite refused for lack of space, the Gate
// is read-only for everything that grows its state, and it never stops
// for a full disk. What each request does in the mode:
//
//   - owner writes (submit) answer 507 storage_full at once; reads, the
//     debug viewer and /v1/version answer as always; /readyz answers 503
//     storage_full;
//   - nothing new is leased (a lease grows the state: an attempt, then
//     its evidence and result), so the queue waits, and deliveries are not
//     picked up;
//   - what running leases need keeps working while writes still succeed
//     (the floor is the reserve for it): a Worker's hello, heartbeats
//     (they rewrite one row), evidence batches, results (recorded alone,
//     without the next lease), goodbyes and the expiry sweep;
//   - once a write has failed for lack of space ("hard"), those are not
//     even tried: heartbeats, evidence and results answer
//     reject{unavailable} and keep the connection, which tells the Worker
//     to keep its lease and send the evidence or result again later, and
//     the sweep pauses, so a lease whose heartbeats could not be stored
//     is not expired for it. When a test write (store.Probe) succeeds
//     again every lease of a connected lane gets a fresh deadline
//     (store.ExtendLeases) before anything else is written.
//
// Nothing that failed is acknowledged: the store rolled it back. The
// Gate leaves the mode by itself once the free space is back above the
// floor and a test write succeeds, then wakes every idle lane.
//
// A Gate that starts on a full disk (its startup writes fail for lack of
// space) serves reads in the mode and defers those writes (lanes marked
// disconnected, the startup sweep, deliveries resumed) until it leaves
// it; until then Worker connections are refused with 503 storage_full.

// SpaceSource reports the space of the state file system. The Gate takes
// one; production's is statfs on the database's directory (spaceOf), a
// test's is a fake.
type SpaceSource interface {
	Space() (store.Space, error)
}

// statfsSpace is the production SpaceSource.
type statfsSpace struct{ dir string }

func (s statfsSpace) Space() (store.Space, error) { return store.StatSpace(s.dir) }

// spaceCheckEvery is how often the Gate reads the free space; every
// submit reads it too (one statfs), so the floor only has to hold what
// the running leases and one group commit write.
const spaceCheckEvery = 250 * time.Millisecond

// The storage_full answers: a refused write (507), and /readyz and a
// Worker connection refused while startup writes wait (503).
var (
	errStorageFull = &apiError{http.StatusInsufficientStorage, "storage_full",
		"the Gate's state file system is below its free-space floor: writes are refused until space is back"}
	errNotReadyFull = &apiError{http.StatusServiceUnavailable, "storage_full",
		"the Gate's state file system is below its free-space floor: writes are refused until space is back"}
)

// storage is the Gate's storage_full state.
type storage struct {
	src        SpaceSource // nil: a memory database, never full
	configured int64       // gate.json free_space_floor_bytes (0: default)
	full       atomic.Bool // in storage_full
	hard       atomic.Bool // a write failed for lack of space since the last successful test write
	deferred   atomic.Bool // startup writes wait for the mode to end

	mu   sync.Mutex
	last store.Space // the last reading (metrics, logs)
}

// read takes a fresh reading and reports whether it is below the floor.
func (s *storage) read() (store.Space, uint64, bool, error) {
	sp, err := s.src.Space()
	if err != nil {
		return store.Space{}, 0, false, err
	}
	s.mu.Lock()
	s.last = sp
	s.mu.Unlock()
	floor := store.Floor(sp.Total, s.configured)
	return sp, floor, sp.Free < floor, nil
}

// isFull reports whether the Gate is in storage_full.
func (g *Gate) isFull() bool { return g.storage.full.Load() }

// enterFull puts the Gate in storage_full (hard: a write failed).
func (g *Gate) enterFull(hard bool, why string) {
	if hard {
		g.storage.hard.Store(true)
	}
	if !g.storage.full.Swap(true) {
		g.log.Warn("storage full: writes refused until space is back", "reason", why)
	}
}

// storageFull reports whether err is the store failing for lack of space
// and, if so, enters storage_full. An I/O error counts when the file
// system is below its floor (SQLite reports some ENOSPC cases that way).
func (g *Gate) storageFull(err error) bool {
	switch {
	case errors.Is(err, store.ErrFull):
	case errors.Is(err, store.ErrStorageIO) && g.storage.src != nil:
		if _, _, below, rerr := g.storage.read(); rerr != nil || !below {
			return false
		}
	default:
		return false
	}
	g.enterFull(true, "a write failed for lack of space")
	return true
}

// checkSpace enters storage_full when the free space is below the floor.
func (g *Gate) checkSpace() {
	if g.storage.src == nil {
		return
	}
	sp, floor, below, err := g.storage.read()
	if err != nil {
		return // the next reading decides; a write that fails still enters the mode
	}
	if below && !g.isFull() {
		g.log.Warn("storage full: below the free-space floor", "free_bytes", sp.Free, "floor_bytes", floor)
		g.enterFull(false, "below the free-space floor")
	}
}

// tryLeaveFull leaves storage_full when the free space is back above the
// floor (or is not known to be below it after a write failure) and a test
// write succeeds: leases whose heartbeats failed get fresh deadlines and
// deferred startup writes run first.
func (g *Gate) tryLeaveFull() {
	if !g.isFull() {
		return
	}
	if g.storage.src != nil {
		if _, _, below, err := g.storage.read(); err != nil || below {
			return
		}
	}
	if err := g.st.Probe(g.ctx); err != nil {
		if !g.storageFull(err) {
			g.storeFailed(err)
		}
		return
	}
	if g.storage.deferred.Load() {
		if err := g.startWrites(g.ctx); err != nil {
			if !g.storageFull(err) {
				g.storeFailed(err)
			}
			return
		}
		g.storage.deferred.Store(false)
	}
	if g.storage.hard.Load() {
		n, err := g.st.ExtendLeases(g.ctx, g.now())
		if err != nil {
			if !g.storageFull(err) {
				g.storeFailed(err)
			}
			return
		}
		g.log.Info("leases extended after storage failures", "count", n)
		g.storage.hard.Store(false)
	}
	g.storage.full.Store(false)
	g.log.Info("storage space is back: writes accepted")
	g.noteDue(g.now())
	g.wakeAll()
}

// storageLoop watches the free space every spaceCheckEvery.
func (g *Gate) storageLoop() {
	defer g.wg.Done()
	t := time.NewTicker(spaceCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-g.failed:
			return
		case <-t.C:
			if g.isFull() {
				g.tryLeaveFull()
			} else {
				g.checkSpace()
			}
		}
	}
}

package store

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Replication modes (gate.json "replication", DECISIONS 20).
const (
	// ReplicationOff: no replica; the store checkpoints for itself.
	ReplicationOff = "off"
	// ReplicationAsync: Litestream copies the WAL on its own schedule; a
	// write acknowledged less than Litestream's sync interval (1 s by
	// default) before the host is lost may be missing from the replica.
	ReplicationAsync = "async"
	// ReplicationSync: every acknowledged write reached the replica first.
	ReplicationSync = "sync"
)

// Replication is how a file store works with a Litestream replica. With a
// mode other than off the store leaves checkpoints to Litestream: its
// writer's wal_autocheckpoint is 0 and the only checkpoints it runs are
// PASSIVE ones (which never reset or truncate the WAL Litestream reads).
type Replication struct {
	// Mode is ReplicationOff ("" means off), ReplicationAsync or
	// ReplicationSync.
	Mode string
	// Socket is Litestream's control socket (required unless off): sync
	// asks it to sync after each group commit, and Lag reads it.
	Socket string
}

// ErrUnreplicated: in sync mode, Litestream did not confirm that the
// group commit carrying this write reached the replica. The write is in
// the local database but was not acknowledged; the caller answers
// "unavailable" and the client retries (every write is idempotent or
// fenced).
var ErrUnreplicated = errors.New("store: the replica did not confirm the write")

func (r Replication) on() bool { return r.Mode != "" && r.Mode != ReplicationOff }

func (r Replication) validate() error {
	switch r.Mode {
	case "", ReplicationOff:
		return nil
	case ReplicationAsync, ReplicationSync:
		if r.Socket == "" || !isAbs(r.Socket) {
			return invalid("replication needs the absolute path of Litestream's control socket")
		}
		return nil
	}
	return invalid("unknown replication mode")
}

func isAbs(p string) bool { return len(p) > 0 && p[0] == '/' }

// syncedAnswers holds the answers of committed batches until Litestream
// confirms a sync that covers them (sync mode). The writer hands it every
// batch it would answer with a success; one goroutine asks Litestream to
// sync once for everything queued since its last request, so the writer
// goes on committing while a sync is in flight and one sync covers
// several commits.
//
// A sync that still fails after retryFor puts it "down" for the rest of
// the outage: from then on a write is answered ErrUnreplicated at once,
// without waiting for a sync, while the goroutine asks Litestream again
// every syncRetry until a sync succeeds. Without that each write of an
// outage waited out a retry window of its own behind the one in flight,
// so a client sending one request after another (a Worker's lane, whose
// heartbeats the Gate answers in order) waited longer for each answer.
type syncedAnswers struct {
	sync func() error // one Litestream sync -wait
	// retryFor is how long a failed sync is retried (every syncRetry)
	// before the held writes answer ErrUnreplicated: Litestream starting
	// up or restarting is not yet a failure.
	retryFor time.Duration

	mu        sync.Mutex
	committed int64 // the writer's commits so far
	synced    int64 // commits a confirmed sync covers
	queue     []heldBatch
	// down: the last sync failed past retryFor (downErr is why); writes
	// are answered ErrUnreplicated at once until a sync succeeds.
	down    bool
	downErr error
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
}

// heldBatch is a batch's answers waiting for a sync covering commit seq.
type heldBatch struct {
	ops     []*op
	results []error
	seq     int64
}

// syncRetry spaces the retries of a failed sync.
const syncRetry = 100 * time.Millisecond

func newSyncedAnswers(sync func() error, retryFor time.Duration) *syncedAnswers {
	a := &syncedAnswers{sync: sync, retryFor: retryFor, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

// commit records one more committed transaction (the writer calls it
// right after COMMIT, before reply).
func (a *syncedAnswers) commit() {
	a.mu.Lock()
	a.committed++
	a.mu.Unlock()
}

// reply answers batch now if every commit so far is confirmed (its
// successes then rest on replicated state only), or at once with
// ErrUnreplicated for its writes while the replica is down; else it holds
// it for the next sync. A batch that committed nothing can still answer a
// success that depends on an unconfirmed commit (a result replayed before
// the first one's sync returned), so it waits too.
func (a *syncedAnswers) reply(batch []*op, results []error) {
	a.mu.Lock()
	if a.synced >= a.committed || !anySuccess(results) {
		a.mu.Unlock()
		answer(batch, results)
		return
	}
	if a.down {
		err := a.downErr
		a.mu.Unlock()
		unreplicated(batch, results, err)
		answer(batch, results)
		return
	}
	a.queue = append(a.queue, heldBatch{ops: append([]*op(nil), batch...), results: results, seq: a.committed})
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// unreplicated turns the successes of a batch's writes into
// ErrUnreplicated (cause: the failed sync); reads keep theirs.
func unreplicated(ops []*op, results []error, cause error) {
	for i, o := range ops {
		if results[i] == nil && !o.read {
			results[i] = fmt.Errorf("%w: %w", ErrUnreplicated, cause)
		}
	}
}

func anySuccess(results []error) bool {
	for _, err := range results {
		if err == nil {
			return true
		}
	}
	return false
}

func (a *syncedAnswers) loop() {
	defer close(a.done)
	for {
		var probe <-chan time.Time
		a.mu.Lock()
		if a.down {
			probe = time.After(syncRetry)
		}
		a.mu.Unlock()
		select {
		case <-a.kick:
			a.flush()
		case <-probe:
			a.probe()
		case <-a.quit:
			// The writer has stopped: whatever it queued gets one more
			// sync, so a clean shutdown acknowledges what it can.
			a.flush()
			return
		}
	}
}

// flush takes everything queued, syncs once (the sync starts after the
// newest queued commit, so it covers them all), retrying for retryFor,
// and answers. When the sync failed the replica is down: the held writes,
// and those queued meanwhile, answer ErrUnreplicated.
func (a *syncedAnswers) flush() {
	a.mu.Lock()
	held := a.queue
	a.queue = nil
	target := a.committed
	retryFor := a.retryFor
	a.mu.Unlock()
	if len(held) == 0 {
		return
	}
	err := a.sync()
	for deadline := time.Now().Add(retryFor); err != nil && time.Now().Before(deadline); {
		select {
		case <-time.After(syncRetry):
		case <-a.quit:
			deadline = time.Time{} // stopping: no more waiting
			continue
		}
		err = a.sync()
	}
	a.mu.Lock()
	if err == nil {
		a.synced = max(a.synced, target)
	} else {
		a.down, a.downErr = true, err
		held = append(held, a.queue...)
		a.queue = nil
	}
	a.mu.Unlock()
	for _, h := range held {
		if err != nil {
			unreplicated(h.ops, h.results, err)
		}
		answer(h.ops, h.results)
	}
}

// probe asks Litestream for one sync while the replica is down; once one
// succeeds, writes wait for syncs again.
func (a *syncedAnswers) probe() {
	a.mu.Lock()
	target := a.committed
	a.mu.Unlock()
	err := a.sync()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.downErr = err
		return
	}
	a.synced = max(a.synced, target)
	a.down, a.downErr = false, nil
}

func (a *syncedAnswers) stop() {
	close(a.quit)
	<-a.done
}

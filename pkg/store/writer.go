package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// maxBatch caps how many queued operations share one transaction.
const maxBatch = 512

// op is one queued write. fn runs inside a SAVEPOINT of the shared
// transaction; if it returns an error only its own changes are rolled back.
type op struct {
	read bool // counted in no statistics
	ctx  context.Context
	fn   func(tx *wtx) error
	done chan error
}

// writer owns the single write connection. It takes everything queued (up
// to maxBatch), runs BEGIN IMMEDIATE, executes each operation in its own
// savepoint, commits once, and only then answers every caller: an answered
// nil means the write is durable (WAL, synchronous=FULL).
type writer struct {
	conn  *sql.Conn
	ops   chan *op
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	stmts map[string]*sql.Stmt
	// evStmts are the event INSERTs by row count (also in stmts).
	evStmts map[int]*sql.Stmt
	base    context.Context
	stats   writerStats
	counts  counters // metrics.go; events guarded by mu
	mu      sync.Mutex

	checkpoint func() // nil for memory databases
	sinceKick  int
	// held holds answers until Litestream confirms them (sync
	// replication); nil otherwise.
	held *syncedAnswers

	// refs caches committed policies rows; pendingRefs are the rows the
	// current transaction's successful operations looked up or inserted,
	// added to refs after COMMIT.
	refs        policyRefs
	pendingRefs []policyRef

	// The current transaction's committed operations' events and first
	// lease waits, counted once it commits.
	batchEvents []eventRow
	batchWaits  []int64
}

type writerStats struct {
	commits int64
	ops     int64
}

// wtx is what an operation sees: prepared statements on the write
// connection inside the current transaction.
type wtx struct {
	w       *writer
	ctx     context.Context
	wrote   bool        // an exec ran: a failure must be rolled back
	evs     []eventRow  // queued events, flushed by the writer
	learned []policyRef // policies rows looked up or inserted, uncommitted
	waits   []int64     // submit-to-lease waits (µs) of first leases granted
}

// eventRow is a queued event: the job's seq, the event's number within
// the job, and its content.
type eventRow struct {
	jobSeq, seq, at int64
	ev
}

// maxEventChunk is the largest multi-row event INSERT (6 parameters per
// row). A batch's events go in one statement per maxEventChunk rows, one
// prepared statement per row count, each parsed once and then reused:
// parsing costs modernc more than inserting a few rows. The statements are
// INSERT OR FAIL and the events' foreign key is deferred, so SQLite opens
// no statement journal for them (it would for a multi-row statement that
// may abort halfway, and copy every page it touches into it): a failed
// insert fails the batch, and the writer then rolls the whole transaction
// back anyway.
const maxEventChunk = 64

// eventInsert returns the prepared INSERT of n event rows.
func (w *writer) eventInsert(n int) (*sql.Stmt, error) {
	var b strings.Builder
	b.WriteString("INSERT OR FAIL INTO events (job_seq, seq, type, at, attempt, code) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?)")
	}
	return w.stmt(b.String())
}

// flushEvents inserts the queued events in order.
func (w *writer) flushEvents(rows []eventRow) error {
	args := make([]any, 0, 6*min(len(rows), maxEventChunk))
	for len(rows) > 0 {
		n := min(len(rows), maxEventChunk)
		st, ok := w.evStmts[n]
		if !ok {
			var err error
			if st, err = w.eventInsert(n); err != nil {
				return err
			}
			w.evStmts[n] = st
		}
		args = args[:0]
		for _, r := range rows[:n] {
			var a, c any
			if r.attempt > 0 {
				a = r.attempt
			}
			if r.code != "" {
				c = r.code
			}
			args = append(args, r.jobSeq, r.seq, r.typ, r.at, a, c)
		}
		if _, err := st.ExecContext(w.base, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func (t *wtx) exec(query string, args ...any) (sql.Result, error) {
	t.wrote = true
	st, err := t.w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t *wtx) queryRow(query string, args ...any) *sql.Row {
	st, err := t.w.stmt(query)
	if err != nil {
		// Surface the prepare error through Row.Scan.
		return t.w.conn.QueryRowContext(t.ctx, query, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

// stmt returns the prepared statement for query, preparing it once. Only
// the writer goroutine calls it.
func (w *writer) stmt(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(w.base, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

func newWriter(ctx context.Context, conn *sql.Conn, checkpoint func(), held *syncedAnswers) (*writer, error) {
	w := &writer{
		conn:       conn,
		checkpoint: checkpoint,
		held:       held,
		ops:        make(chan *op, maxBatch),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		stmts:      map[string]*sql.Stmt{},
		evStmts:    map[int]*sql.Stmt{},
		base:       context.WithoutCancel(ctx),
		counts:     newCounters(),
	}
	go w.loop()
	return w, nil
}

// do queues fn and waits for its durable outcome. If ctx ends first, do
// returns ctx.Err(); the operation may still commit.
func (w *writer) do(ctx context.Context, fn func(tx *wtx) error) error {
	return w.submit(ctx, &op{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

func (w *writer) submit(ctx context.Context, o *op) error {
	select {
	case <-w.quit:
		return ErrClosed
	default:
	}
	select {
	case w.ops <- o:
	case <-w.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the operation is the writer's until it answers: its fn
	// writes the caller's outputs, so returning on ctx.Done here would let
	// the caller read them while the writer may still be running it. The
	// writer checks o.ctx before running a batch, so a cancelled caller
	// waits at most for the batch in progress.
	select {
	case err := <-o.done:
		return err
	case <-w.done:
		// The writer exited; it answered everything it dequeued, so an
		// unanswered operation was queued after its final drain.
		select {
		case err := <-o.done:
			return err
		default:
			return ErrClosed
		}
	}
}

func (w *writer) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

// Lingering: at low concurrency every operation tends to commit alone
// (each caller waits for its commit, and the next operation arrives while
// the previous commit runs, so it finds the writer busy and then runs by
// itself), and a commit costs far more than an operation. The writer
// therefore expects the callers it has just answered to come back, and
// those whose operations queued up while it was committing to be there as
// well; when that expected batch is not too large (at most lingerMax;
// beyond that batches are big already and waiting measured no gain) and
// not yet complete, it waits up to lingerFor for the rest before it
// begins. A wait that times out is evidence against the expectation:
// lingering is then skipped for a number of batches that doubles with
// every consecutive timeout (up to lingerBackoffMax) and resets when a
// wait pays off. Lingering never delays a caller's answer past its commit
// by more than lingerFor, and only when another operation is queued or was
// just answered.
const (
	lingerMax        = 16
	lingerFor        = 300 * time.Microsecond
	lingerBackoffMax = 256
)

func (w *writer) loop() {
	defer close(w.done)
	defer func() {
		for _, st := range w.stmts {
			st.Close()
		}
		w.conn.Close()
		// Held answers are given before done closes: a caller waiting
		// on done then finds its answer.
		if w.held != nil {
			w.held.stop()
		}
	}()
	batch := make([]*op, 0, maxBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		answered, queued int // writes answered by the last batch, ops queued during it
		skip, backoff    int // batches left without lingering, and the next such penalty
	)
	for {
		select {
		case <-w.quit:
			w.drain()
			return
		case o := <-w.ops:
			batch = append(batch[:0], o)
		}
		w.fill(&batch)
		expect := answered + queued
		if queued == 0 {
			// The first operation is one of the answered callers back.
			expect = max(answered, 1)
		}
		if skip > 0 {
			skip--
		} else if len(batch) < expect && expect <= lingerMax {
			if w.linger(&batch, expect, timer) {
				backoff = 0
			} else {
				backoff = min(max(2*backoff, 1), lingerBackoffMax)
				skip = backoff
			}
		}
		answered = w.run(batch)
		queued = len(w.ops)
		// The callers just answered are runnable on this P: let them run
		// (and queue their next operations) before the next batch starts,
		// instead of waiting behind its CPU work. Batches grow a little
		// and a lane's result-to-next-result cycle shrinks.
		runtime.Gosched()
	}
}

// fill adds whatever is queued to the batch, without waiting.
func (w *writer) fill(batch *[]*op) {
	for len(*batch) < maxBatch {
		select {
		case o := <-w.ops:
			*batch = append(*batch, o)
		default:
			return
		}
	}
}

// linger waits up to lingerFor for the batch to reach expect operations
// and reports whether it did.
func (w *writer) linger(batch *[]*op, expect int, timer *time.Timer) bool {
	timer.Reset(lingerFor)
	defer timer.Stop()
	for len(*batch) < expect {
		select {
		case o := <-w.ops:
			*batch = append(*batch, o)
		case <-timer.C:
			return false
		case <-w.quit:
			return false
		}
	}
	w.fill(batch)
	return true
}

// drain answers everything still queued with ErrClosed.
func (w *writer) drain() {
	for {
		select {
		case o := <-w.ops:
			o.done <- ErrClosed
		default:
			return
		}
	}
}

func (w *writer) exec(query string) error {
	st, err := w.stmt(query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(w.base)
	return err
}

// run executes one batch in one transaction. Operations first run without
// savepoints (the common case: every operation succeeds, or fails during
// its reads before writing anything). If an operation fails after it wrote
// (wtx.wrote), the transaction is rolled back and the batch re-run with a
// SAVEPOINT around each operation, so that failure undoes only itself.
// Operations are pure functions of the database state and their inputs, and
// reset their outputs on entry, so re-running them is safe.
//
// It returns how many write operations it answered.
func (w *writer) run(batch []*op) int {
	results := make([]error, len(batch))
	live, writes := 0, 0
	for i, o := range batch {
		if !o.read {
			writes++
		}
		if err := o.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		live++
	}
	if live == 0 {
		answer(batch, results)
		return writes
	}
	first := append([]error(nil), results...)
	if !w.attempt(batch, first, false) {
		w.attempt(batch, results, true)
	}
	return writes
}

// attempt runs the batch once. It returns false (having rolled back and
// answered nobody) when an operation failed after writing and savepoints
// were not in use; otherwise it commits or rolls back and answers all.
func (w *writer) attempt(batch []*op, results []error, savepoints bool) bool {
	start := time.Now()
	if err := w.exec("BEGIN IMMEDIATE"); err != nil {
		fail(batch, results, fmt.Errorf("store: begin: %w", err))
		return true
	}
	committed := 0
	w.pendingRefs = w.pendingRefs[:0]
	w.batchEvents, w.batchWaits = w.batchEvents[:0], w.batchWaits[:0]
	pre := append([]error(nil), results...)
	var pending []eventRow
	for i, o := range batch {
		if pre[i] != nil {
			continue
		}
		if o.read && len(pending) > 0 {
			if err := w.flushEvents(pending); err != nil {
				w.abort(batch, results, fmt.Errorf("store: insert events: %w", err))
				return true
			}
			pending = pending[:0]
		}
		t := &wtx{w: w, ctx: w.base}
		if savepoints {
			if err := w.exec("SAVEPOINT op"); err != nil {
				w.abort(batch, results, fmt.Errorf("store: savepoint: %w", err))
				return true
			}
		}
		err := o.fn(t)
		if err != nil && t.wrote {
			if !savepoints {
				w.exec("ROLLBACK")
				return false
			}
			if rerr := w.exec("ROLLBACK TO op"); rerr != nil {
				w.abort(batch, results, fmt.Errorf("store: rollback to savepoint: %w", rerr))
				return true
			}
		}
		if savepoints {
			if rerr := w.exec("RELEASE op"); rerr != nil {
				w.abort(batch, results, fmt.Errorf("store: release savepoint: %w", rerr))
				return true
			}
		}
		if err == nil && !o.read {
			committed++
			pending = append(pending, t.evs...)
			w.pendingRefs = append(w.pendingRefs, t.learned...)
			w.batchEvents = append(w.batchEvents, t.evs...)
			w.batchWaits = append(w.batchWaits, t.waits...)
		}
		results[i] = err
	}
	if committed > 0 && len(pending) > 0 {
		if err := w.flushEvents(pending); err != nil {
			w.abort(batch, results, fmt.Errorf("store: insert events: %w", err))
			return true
		}
	}
	if committed == 0 {
		// Nothing to make durable (every write failed, or reads only).
		w.exec("ROLLBACK")
		w.reply(batch, results)
		return true
	}
	if err := w.exec("COMMIT"); err != nil {
		w.abort(batch, results, fmt.Errorf("store: commit: %w", err))
		return true
	}
	w.refs.add(w.pendingRefs)
	w.mu.Lock()
	w.stats.commits++
	w.stats.ops += int64(committed)
	w.counts.committed(time.Since(start), committed, w.batchEvents, w.batchWaits)
	w.mu.Unlock()
	if w.sinceKick++; w.checkpoint != nil && w.sinceKick >= checkpointEvery {
		w.sinceKick = 0
		w.checkpoint()
	}
	if w.held != nil {
		w.held.commit()
	}
	w.reply(batch, results)
	return true
}

// reply answers a batch that rolled back or committed: at once, or, with
// sync replication, once Litestream confirms the commits it rests on.
func (w *writer) reply(batch []*op, results []error) {
	if w.held != nil {
		w.held.reply(batch, results)
		return
	}
	answer(batch, results)
}

// abort rolls the whole transaction back and fails every operation that
// had not already failed on its own.
func (w *writer) abort(batch []*op, results []error, err error) {
	w.exec("ROLLBACK")
	fail(batch, results, err)
}

func fail(batch []*op, results []error, err error) {
	for i := range batch {
		if results[i] == nil {
			results[i] = err
		}
	}
	answer(batch, results)
}

// answer hands every caller its outcome; SQLite's storage failures are
// classified (ErrFull, ErrStorageIO) on the way out.
func answer(batch []*op, results []error) {
	for i, o := range batch {
		o.done <- classify(results[i])
	}
}

// Stats reports group-commit counters since Open: committed write
// transactions and the operations they carried (failed operations and
// reads excluded).
type Stats struct {
	Commits    int64
	Operations int64
}

// Stats returns the writer's counters.
func (s *Store) Stats() Stats {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return Stats{Commits: s.w.stats.commits, Operations: s.w.stats.ops}
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

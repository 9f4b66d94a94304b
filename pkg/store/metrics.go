package store

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/metrics"
)

// What the store measures for the Gate's GET /metrics (docs/api.md). Two
// kinds, and neither reads a table in proportion to its history:
//
//   - Counters, in memory since Open, updated by the writer after each
//     COMMIT from what that transaction carried: its duration and
//     operations, every event it inserted (by type and code), and the
//     submit-to-lease wait of every first lease it granted. A rolled-back
//     transaction counts nothing.
//   - Gauges, read on demand from the partial indexes of live rows only
//     (queued jobs, leased attempts, active deliveries), plus one primary
//     key lookup per pool.

// Histogram bounds.
var (
	// commitBounds: seconds of one write transaction, BEGIN to COMMIT.
	commitBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	// batchBounds: write operations in one transaction (maxBatch at most).
	batchBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	// leaseWaitBounds: seconds from a job's submit to its first lease.
	leaseWaitBounds = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}
)

// maxEventKeys bounds the distinct (type, code, attempt) keys counted;
// later new keys are counted under the code "other". Codes are bounded
// tables already (the Gate validates them); this only caps memory.
const maxEventKeys = 1024

// EventKey is one kind of committed event: its type, its code ("" for
// none) and whether it names an attempt (a job's "succeeded" or "failed"
// ends a delivery when it does not).
type EventKey struct {
	Type, Code string
	Attempt    bool
}

// EventCount is how many events of one kind were committed.
type EventCount struct {
	EventKey
	N int64
}

// Counters is what the writer has counted since Open.
type Counters struct {
	Commits, Operations int64
	// CommitSeconds: duration of each committed write transaction.
	CommitSeconds metrics.HistogramSnapshot
	// BatchOperations: write operations per committed transaction.
	BatchOperations metrics.HistogramSnapshot
	// SubmitToLeaseSeconds: for each lease of a job's first attempt, the
	// Gate's clock from the submit to the lease (a lease the Worker
	// released unstarted is counted again when the job is leased anew).
	SubmitToLeaseSeconds metrics.HistogramSnapshot
	// Events by kind, sorted by type, code, then attempt.
	Events []EventCount
}

// counters are the writer's metrics state: the histograms are lock-free,
// events are guarded by writer.mu.
type counters struct {
	commit, batch, leaseWait *metrics.Hist
	events                   map[EventKey]int64
}

func newCounters() counters {
	return counters{
		commit:    metrics.NewHist(commitBounds...),
		batch:     metrics.NewHist(batchBounds...),
		leaseWait: metrics.NewHist(leaseWaitBounds...),
		events:    map[EventKey]int64{},
	}
}

// committed records a transaction that committed: its duration, its
// write operations, its events and its first leases' waits (µs). The
// caller holds w.mu.
func (c *counters) committed(d time.Duration, ops int, evs []eventRow, waits []int64) {
	c.commit.Observe(d.Seconds())
	c.batch.Observe(float64(ops))
	for _, us := range waits {
		c.leaseWait.Observe(float64(us) / 1e6)
	}
	for _, e := range evs {
		k := EventKey{Type: e.typ, Code: e.code, Attempt: e.attempt > 0}
		if _, ok := c.events[k]; !ok && len(c.events) >= maxEventKeys {
			k.Code = "other"
		}
		c.events[k]++
	}
}

// Counters returns the writer's counters.
func (s *Store) Counters() Counters {
	w := s.w
	w.mu.Lock()
	out := Counters{Commits: w.stats.commits, Operations: w.stats.ops, Events: make([]EventCount, 0, len(w.counts.events))}
	for k, n := range w.counts.events {
		out.Events = append(out.Events, EventCount{k, n})
	}
	w.mu.Unlock()
	slices.SortFunc(out.Events, func(a, b EventCount) int {
		if c := strings.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		if c := strings.Compare(a.Code, b.Code); c != 0 {
			return c
		}
		switch {
		case a.Attempt == b.Attempt:
			return 0
		case b.Attempt:
			return -1
		}
		return 1
	})
	out.CommitSeconds = w.counts.commit.Snapshot()
	out.BatchOperations = w.counts.batch.Snapshot()
	out.SubmitToLeaseSeconds = w.counts.leaseWait.Snapshot()
	return out
}

// Queue is one pool's waiting jobs: pending and retry_wait.
type Queue struct {
	Pool   string
	Jobs   int
	Oldest time.Time // submit time of the pool's oldest waiting job
}

// Gauges is the live state the metrics read, from one snapshot.
type Gauges struct {
	Queues    []Queue // pools with waiting jobs, by pool
	RetryWait int     // jobs in retry_wait (all pools)
	Leased    int     // leased attempts (= leased jobs)
	// Deliveries counts active deliveries by phase (push, pull_request,
	// ci, merge); each is a delivering job.
	Deliveries map[string]int
}

// Queries of Gauges (plan_test.go checks that each uses its index).
const (
	queuesSQL     = `SELECT pool, count(*), min(seq) FROM jobs WHERE status IN ('pending', 'retry_wait') GROUP BY pool`
	retryWaitSQL  = `SELECT count(*) FROM jobs WHERE status = 'retry_wait'`
	leasedSQL     = `SELECT count(*) FROM attempts WHERE status = 'leased'`
	deliveriesSQL = `SELECT phase FROM deliveries WHERE phase <> 'merged' AND phase <> 'failed'`
	createdSQL    = `SELECT created_at FROM jobs WHERE seq = ?`
)

// Gauges reads the live counts. Its cost grows with the live rows only
// (waiting jobs, leased attempts, active deliveries), never with finished
// jobs.
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	var g Gauges
	err := s.read(ctx, func(q querier) error {
		g = Gauges{Deliveries: map[string]int{}}
		rows, err := q.QueryContext(ctx, queuesSQL)
		if err != nil {
			return err
		}
		var seqs []int64
		for rows.Next() {
			var (
				qu  Queue
				seq int64
			)
			if err := rows.Scan(&qu.Pool, &qu.Jobs, &seq); err != nil {
				rows.Close()
				return err
			}
			g.Queues = append(g.Queues, qu)
			seqs = append(seqs, seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		for i, seq := range seqs {
			var us int64
			if err := q.QueryRowContext(ctx, createdSQL, seq).Scan(&us); err != nil {
				return err
			}
			g.Queues[i].Oldest = fromMicros(us).Time
		}
		if err := q.QueryRowContext(ctx, retryWaitSQL).Scan(&g.RetryWait); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, leasedSQL).Scan(&g.Leased); err != nil {
			return err
		}
		drows, err := q.QueryContext(ctx, deliveriesSQL)
		if err != nil {
			return err
		}
		defer drows.Close()
		for drows.Next() {
			var phase string
			if err := drows.Scan(&phase); err != nil {
				return err
			}
			g.Deliveries[phase]++
		}
		return drows.Err()
	})
	return g, err
}

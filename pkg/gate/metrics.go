package gate

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/metrics"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// GET /metrics: the Prometheus text format 0.0.4 (docs/api.md, Metrics),
// an owner route like every other on the one listener: the series name
// pools, repositories' codes and GitHub budgets, which no unauthenticated
// caller may read, and a second listener would be a second address to
// bind, firewall and document for the same owner. Every series comes
// from memory (the store's commit counters, the lane registry, the
// storage_full state, the delivery pacing), from store.Gauges, which
// reads the partial indexes of live rows only (a scrape costs the same
// with a million finished jobs as with none), and from Litestream's
// control socket when the state is replicated.

// replicaAskTimeout bounds a scrape's question to Litestream's control
// socket (the lag is left out when it does not answer in time).
const replicaAskTimeout = 2 * time.Second

// handleMetrics answers one scrape.
func (g *Gate) handleMetrics(w http.ResponseWriter, r *http.Request) {
	gauges, err := g.st.Gauges(r.Context())
	if err != nil {
		g.storeError(w, err)
		return
	}
	b, err := metrics.Encode(g.families(r.Context(), gauges, g.st.Counters()))
	if err != nil {
		writeError(w, errInternal)
		return
	}
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// families builds every series of a scrape.
func (g *Gate) families(ctx context.Context, gs store.Gauges, c store.Counters) []metrics.Family {
	var fams []metrics.Family
	add := func(f metrics.Family) { fams = append(fams, f) }
	now := g.now()

	fams = append(fams, g.jobFamilies(gs)...)
	queue := metrics.Family{Name: "forge_queue_depth", Type: metrics.Gauge,
		Help: "Jobs waiting for a lane (pending or retry_wait), by pool."}
	oldest := metrics.Family{Name: "forge_queue_oldest_age_seconds", Type: metrics.Gauge,
		Help: "Seconds since the submit of the oldest job waiting in the pool (0 when none waits)."}
	for _, p := range g.poolsWith(gs.Queues) {
		n, age := 0, 0.0
		if i := slices.IndexFunc(gs.Queues, func(q store.Queue) bool { return q.Pool == p }); i >= 0 {
			n, age = gs.Queues[i].Jobs, max(now.Sub(gs.Queues[i].Oldest).Seconds(), 0)
		}
		queue.Add(float64(n), metrics.L("pool", p))
		oldest.Add(age, metrics.L("pool", p))
	}
	add(queue)
	add(oldest)
	wait := metrics.Family{Name: "forge_submit_to_lease_seconds", Type: metrics.Histogram,
		Help: "Seconds from a job's submit to the lease of its first attempt."}
	wait.AddHistogram(c.SubmitToLeaseSeconds)
	add(wait)
	fams = append(fams, eventFamilies(c.Events)...)
	lanes := metrics.Family{Name: "forge_lanes_connected", Type: metrics.Gauge,
		Help: "Worker lanes with a live connection, by pool."}
	connected := g.lanes.connectedByPool()
	for _, p := range g.poolsWith(nil) {
		lanes.Add(float64(connected[p]), metrics.L("pool", p))
	}
	add(lanes)

	commits := metrics.Family{Name: "forge_store_commits_total", Type: metrics.Counter,
		Help: "Durable write transactions since the Gate opened its store."}
	commits.Add(float64(c.Commits))
	add(commits)
	ops := metrics.Family{Name: "forge_store_operations_total", Type: metrics.Counter,
		Help: "Write operations those transactions carried."}
	ops.Add(float64(c.Operations))
	add(ops)
	commitLat := metrics.Family{Name: "forge_store_commit_seconds", Type: metrics.Histogram,
		Help: "Seconds of one durable write transaction, BEGIN to COMMIT."}
	commitLat.AddHistogram(c.CommitSeconds)
	add(commitLat)
	batch := metrics.Family{Name: "forge_store_batch_operations", Type: metrics.Histogram,
		Help: "Write operations per durable transaction (group commit)."}
	batch.AddHistogram(c.BatchOperations)
	add(batch)
	fams = append(fams, g.storageFamilies()...)
	fams = append(fams, g.replicationFamilies(ctx)...)
	fams = append(fams, g.deliveryFamilies(gs)...)
	return fams
}

// jobFamilies: jobs by live status.
func (g *Gate) jobFamilies(gs store.Gauges) []metrics.Family {
	queued := 0
	for _, q := range gs.Queues {
		queued += q.Jobs
	}
	delivering := 0
	for _, n := range gs.Deliveries {
		delivering += n
	}
	jobs := metrics.Family{Name: "forge_jobs", Type: metrics.Gauge,
		Help: "Jobs not yet finished, by status (finished ones: forge_jobs_finished_total)."}
	jobs.Add(float64(queued-gs.RetryWait), metrics.L("status", store.JobPending))
	jobs.Add(float64(gs.Leased), metrics.L("status", store.JobLeased))
	jobs.Add(float64(gs.RetryWait), metrics.L("status", store.JobRetryWait))
	jobs.Add(float64(delivering), metrics.L("status", store.JobDelivering))
	return []metrics.Family{jobs}
}

// eventFamilies: the counters read from committed events.
func eventFamilies(evs []store.EventCount) []metrics.Family {
	submitted := metrics.Family{Name: "forge_jobs_submitted_total", Type: metrics.Counter,
		Help: "Jobs submitted since the Gate started."}
	leased := metrics.Family{Name: "forge_attempts_leased_total", Type: metrics.Counter,
		Help: "Attempts leased to lanes since the Gate started."}
	finished := metrics.Family{Name: "forge_jobs_finished_total", Type: metrics.Counter,
		Help: "Jobs that ended since the Gate started, by status and (failed) failure code."}
	attempts := metrics.Family{Name: "forge_attempts_finished_total", Type: metrics.Counter,
		Help: "Attempts that ended since the Gate started, by outcome and (failed) failure code."}
	phases := metrics.Family{Name: "forge_delivery_phases_entered_total", Type: metrics.Counter,
		Help: "Delivery phases entered since the Gate started, by phase."}
	delivered := metrics.Family{Name: "forge_deliveries_finished_total", Type: metrics.Counter,
		Help: "Deliveries that ended since the Gate started, by phase (merged, failed) and failure code."}
	var nSubmitted, nLeased float64
	// Several event kinds can feed one series (a job's succeeded with
	// and without an attempt): sum them per series first.
	type key struct {
		f             *metrics.Family
		name1, value1 string
		name2, value2 string
	}
	sums := map[key]float64{}
	var order []key
	count := func(k key, n int64) {
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k] += float64(n)
	}
	for _, e := range evs {
		switch e.Type {
		case store.EventSubmitted:
			nSubmitted += float64(e.N)
		case store.EventLeased:
			nLeased += float64(e.N)
		case store.EventSucceeded:
			count(key{&finished, "status", store.JobSucceeded, "", ""}, e.N)
			if e.Attempt {
				count(key{&attempts, "outcome", store.AttemptSucceeded, "", ""}, e.N)
			} else {
				count(key{&delivered, "phase", store.DeliveryMerged, "", ""}, e.N)
			}
		case store.EventFailed:
			count(key{&finished, "status", store.JobFailed, "code", e.Code}, e.N)
			if !e.Attempt {
				count(key{&delivered, "phase", store.DeliveryFailed, "code", e.Code}, e.N)
			}
		case store.EventAttemptFailed:
			count(key{&attempts, "outcome", store.AttemptFailed, "code", e.Code}, e.N)
		case store.EventExpired:
			count(key{&attempts, "outcome", store.AttemptExpired, "", ""}, e.N)
		case store.EventReleased:
			count(key{&attempts, "outcome", "released", "", ""}, e.N)
		case store.EventDelivering:
			count(key{&attempts, "outcome", store.AttemptSucceeded, "", ""}, e.N)
			count(key{&phases, "phase", store.DeliveryPush, "", ""}, e.N)
		case store.EventDelivery:
			count(key{&phases, "phase", e.Code, "", ""}, e.N)
		}
	}
	for _, k := range order {
		ls := []metrics.Label{metrics.L(k.name1, k.value1)}
		if k.name2 != "" {
			ls = append(ls, metrics.L(k.name2, k.value2))
		}
		k.f.Add(sums[k], ls...)
	}
	submitted.Add(nSubmitted)
	leased.Add(nLeased)
	return []metrics.Family{submitted, leased, finished, attempts, phases, delivered}
}

// storageFamilies: storage_full and the last free-space reading.
func (g *Gate) storageFamilies() []metrics.Family {
	full := metrics.Family{Name: "forge_storage_full", Type: metrics.Gauge,
		Help: "1 while the Gate is in storage_full (writes refused), else 0."}
	full.Add(boolValue(g.isFull()))
	out := []metrics.Family{full}
	if g.storage.src == nil {
		return out // a memory database: no file system to read
	}
	g.storage.mu.Lock()
	sp := g.storage.last
	g.storage.mu.Unlock()
	if sp.Total == 0 {
		return out // not read yet
	}
	free := metrics.Family{Name: "forge_storage_free_bytes", Type: metrics.Gauge,
		Help: "Free bytes of the state file system at the last reading."}
	free.Add(float64(sp.Free))
	floor := metrics.Family{Name: "forge_storage_floor_bytes", Type: metrics.Gauge,
		Help: "The free-space floor below which the Gate enters storage_full."}
	floor.Add(float64(store.Floor(sp.Total, g.storage.configured)))
	return append(out, free, floor)
}

// replicationFamilies: whether the state is replicated (DECISIONS 20,
// docs/operations.md) and how long ago Litestream last confirmed a sync
// of the replica.
func (g *Gate) replicationFamilies(ctx context.Context) []metrics.Family {
	on := metrics.Family{Name: "forge_replication_enabled", Type: metrics.Gauge,
		Help: "1 when the state is replicated by Litestream (replication async or sync), else 0."}
	lag := metrics.Family{Name: "forge_replication_lag_seconds", Type: metrics.Gauge,
		Help: "Seconds since Litestream last confirmed a sync of the replica (0 without replication)."}
	ctx, cancel := context.WithTimeout(ctx, replicaAskTimeout)
	defer cancel()
	st, replicated, err := g.st.ReplicaState(ctx)
	if !replicated {
		on.Add(0)
		lag.Add(0)
		return []metrics.Family{on, lag}
	}
	on.Add(1)
	if d, ok := st.Lag(g.now()); err == nil && ok {
		lag.Add(d.Seconds()) // no sample while Litestream does not say
	}
	return []metrics.Family{on, lag}
}

// deliveryFamilies: active deliveries by phase and the GitHub budgets.
func (g *Gate) deliveryFamilies(gs store.Gauges) []metrics.Family {
	active := metrics.Family{Name: "forge_deliveries", Type: metrics.Gauge,
		Help: "Active deliveries, by phase."}
	for _, p := range []string{store.DeliveryPush, store.DeliveryPullRequest, store.DeliveryCI, store.DeliveryReview, store.DeliveryMerge} {
		active.Add(float64(gs.Deliveries[p]), metrics.L("phase", p))
	}
	out := []metrics.Family{active}
	if g.delivery == nil {
		return out
	}
	limit := metrics.Family{Name: "forge_github_rate_limit", Type: metrics.Gauge,
		Help: "Requests per window of a GitHub rate-limit budget the delivery polls spend, at its last answer."}
	remaining := metrics.Family{Name: "forge_github_rate_limit_remaining", Type: metrics.Gauge,
		Help: "Requests left in the budget's window at its last answer."}
	reset := metrics.Family{Name: "forge_github_rate_limit_reset_timestamp_seconds", Type: metrics.Gauge,
		Help: "Unix time at which the budget's window resets, from its last answer."}
	for _, b := range g.delivery.Budgets() {
		l := metrics.L("budget", budgetLabel(b))
		limit.Add(float64(b.Rate.Limit), l)
		remaining.Add(float64(b.Rate.Remaining), l)
		reset.Add(float64(b.Rate.Reset.Unix()), l)
	}
	return append(out, limit, remaining, reset)
}

// budgetLabel names a budget: "unauthenticated" (the Gate's address) or
// "installation:<id>".
func budgetLabel(b delivery.Budget) string {
	if b.Name == "" {
		return "unauthenticated"
	}
	return b.Name
}

// poolsWith returns every configured pool and every pool of queues, sorted.
func (g *Gate) poolsWith(queues []store.Queue) []string {
	var pools []string
	for i := range g.cfg.Workers {
		pools = append(pools, g.cfg.Workers[i].Pool)
	}
	for _, q := range queues {
		pools = append(pools, q.Pool)
	}
	slices.Sort(pools)
	return slices.Compact(pools)
}

// connectedByPool counts the lanes with a live connection per pool.
func (r *registry) connectedByPool() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, l := range r.lanes {
		out[l.pool]++
	}
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/policy"
)

// ev is one event row to insert.
type ev struct {
	typ     string
	attempt int
	code    string
}

// events queues a job's events; last is the job's event_count after the
// UPDATE that accounted for them, so they are numbered last-len+1..last.
// The writer inserts queued events for the whole batch with multi-row
// INSERTs just before COMMIT (and before any read in the same
// transaction); a failed operation's events are dropped with it.
func (t *wtx) events(jobSeq, last, at int64, evs ...ev) {
	first := last - int64(len(evs)) + 1
	for i, e := range evs {
		t.evs = append(t.evs, eventRow{jobSeq: jobSeq, seq: first + int64(i), at: at, ev: e})
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Submit persists a new pending job and its "submitted" event in one
// durable transaction. A job id that already exists yields ErrConflict.
func (s *Store) Submit(ctx context.Context, j NewJob, now time.Time) (Job, error) {
	job, insert, err := s.submitOp(j, now)
	if err != nil {
		return Job{}, err
	}
	if err := s.w.do(ctx, insert); err != nil {
		return Job{}, err
	}
	return job, nil
}

// SubmitAndLease is Submit followed, in the same transaction (one commit),
// by Lease for next: a lane the caller believes idle gets the oldest
// eligible job (usually the one just submitted) at once. The job is
// persisted whatever the lease finds: a nil *Lease means nothing was
// eligible or the lane could not take work (its generation is no longer
// live, or it already holds an attempt), and leaseErr then says which
// (nil, ErrStale or ErrLaneBusy). err is the submit's error; on err nothing
// is written.
func (s *Store) SubmitAndLease(ctx context.Context, j NewJob, next LeaseRequest, now time.Time) (job Job, l *Lease, leaseErr, err error) {
	if !next.valid() {
		return Job{}, nil, nil, invalid("malformed lease request")
	}
	job, insert, err := s.submitOp(j, now)
	if err != nil {
		return Job{}, nil, nil, err
	}
	us := now.UnixMicro()
	err = s.w.do(ctx, func(t *wtx) error {
		l, leaseErr = nil, nil
		if err := insert(t); err != nil {
			return err
		}
		var lerr error
		l, lerr = t.lease(next, us)
		if errors.Is(lerr, ErrStale) || errors.Is(lerr, ErrLaneBusy) {
			// Detected by reads before the lease writes anything.
			l, leaseErr = nil, lerr
			return nil
		}
		return lerr
	})
	if errors.Is(err, ErrUnreplicated) {
		return Job{}, l, nil, err // the granted lease, to give back (see Lease)
	}
	if err != nil {
		return Job{}, nil, nil, err
	}
	return job, l, leaseErr, nil
}

// submitOp validates a new job and returns it with the writer operation
// that inserts it.
func (s *Store) submitOp(j NewJob, now time.Time) (Job, func(t *wtx) error, error) {
	if !ident.ValidRef(j.ID) {
		return Job{}, nil, invalid("malformed job id")
	}
	if !ident.ValidID(j.Pool) {
		return Job{}, nil, invalid("malformed pool")
	}
	switch j.Kind {
	case KindText:
		if j.RepositoryID != "" || j.Delivery != nil || j.DefaultBranch != "" || j.PreparedPath != "" ||
			j.BaseSHA != "" || j.TestArgCounts != nil {
			return Job{}, nil, invalid("text job with a repository")
		}
	case KindCoding:
		if !ident.ValidID(j.RepositoryID) {
			return Job{}, nil, invalid("malformed repository id")
		}
		if !validTarget(j.Delivery) {
			return Job{}, nil, invalid("malformed delivery target")
		}
		if j.DefaultBranch != "" && !ident.ValidBranch(j.DefaultBranch) {
			return Job{}, nil, invalid("malformed default branch")
		}
		if j.PreparedPath != "" && !ident.ValidRepositoryPath(j.PreparedPath) {
			return Job{}, nil, invalid("malformed prepared path")
		}
		if j.BaseSHA != "" && !ident.ValidSHA(j.BaseSHA) {
			return Job{}, nil, invalid("malformed base sha")
		}
	default:
		return Job{}, nil, invalid("unknown job kind")
	}
	if len(j.Task) > MaxTaskBytes {
		return Job{}, nil, invalid("task too large")
	}
	task, ok := compactObject(j.Task)
	if !ok {
		return Job{}, nil, invalid("task is not a JSON object")
	}
	var testArgs any
	if j.Kind == KindCoding {
		a, ok := encodeTestArgs(j.TestArgCounts)
		if !ok {
			return Job{}, nil, invalid("malformed test argument counts")
		}
		testArgs = a
	}
	p, err := s.policies.decode(j.Policy)
	if err != nil {
		return Job{}, nil, err
	}
	us := now.UnixMicro()
	job := Job{
		ID: j.ID, Kind: j.Kind, Status: JobPending, RepositoryID: j.RepositoryID,
		CreatedAt: fromMicros(us), UpdatedAt: fromMicros(us),
		Pool: j.Pool, PluginID: p.pluginID, BaseSHA: j.BaseSHA, TestArgCounts: j.TestArgCounts,
	}
	return job, func(t *wtx) error {
		var owner, repo, base any
		if d := j.Delivery; d != nil {
			owner, repo, base = d.Owner, d.Repo, d.BaseBranch
		}
		policyID, err := t.policyID(j.Policy, p)
		if err != nil {
			return err
		}
		res, err := t.exec(`INSERT INTO jobs (id, kind, task, pool, plugin_id, repository_id, default_branch, prepared_path,
  base_sha, test_args, policy_id,
  lease_ttl_us, retry_base_us, max_attempts, status, event_count, delivery_owner, delivery_repo, delivery_base,
  created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			j.ID, j.Kind, task, j.Pool, p.pluginID, nullable(j.RepositoryID), nullable(j.DefaultBranch), nullable(j.PreparedPath),
			nullable(j.BaseSHA), testArgs, policyID,
			p.leaseTTL, p.retryBase, p.maxAttempts, owner, repo, base, us, us)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return err
			}
			return ErrConflict
		}
		// seq is the rowid (INTEGER PRIMARY KEY) of the row just inserted.
		seq, err := res.LastInsertId()
		if err != nil {
			return err
		}
		t.events(seq, 1, us, ev{typ: EventSubmitted})
		return nil
	}, nil
}

func newAttemptID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// inList appends "?, ?, ..." placeholders for ids to b and their values to
// args. An empty list yields NULL, which matches nothing.
func inList(b *strings.Builder, args []any, ids []string) []any {
	if len(ids) == 0 {
		b.WriteString("NULL")
		return args
	}
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		args = append(args, id)
		b.WriteString("?")
	}
	return args
}

// candidateSQL selects the oldest eligible job in a pool. A separate
// SELECT and single-row UPDATE (by seq) rather than one UPDATE … WHERE seq
// = (subquery) RETURNING: SQLite cannot tell that such an UPDATE changes
// one row, so it opens a statement journal for it, and with modernc that
// costs more (allocations, mmap and munmap) than the extra statement.
func candidateSQL(pool string, us int64, plugins, repositories []string) (string, []any) {
	args := []any{pool, us}
	var b strings.Builder
	b.WriteString(`SELECT seq, id, kind, task, policy_id, attempt_count, event_count, updated_at, created_at
FROM jobs WHERE pool = ? AND status IN ('pending', 'retry_wait') AND (status = 'pending' OR retry_at <= ?)
  AND plugin_id IN (`)
	args = inList(&b, args, plugins)
	b.WriteString(`) AND (kind = 'text' OR repository_id IN (`)
	args = inList(&b, args, repositories)
	b.WriteString(`)) ORDER BY seq LIMIT 1`)
	return b.String(), args
}

// LeaseRequest names the lane asking for work and what it can run.
type LeaseRequest struct {
	Lane, Generation, Pool string
	Plugins, Repositories  []string
}

func (r LeaseRequest) valid() bool {
	return ident.ValidLane(r.Lane) && ident.ValidRef(r.Generation) && ident.ValidID(r.Pool) &&
		validIDList(r.Plugins, MaxListPlugins) && validIDList(r.Repositories, MaxListRepositories)
}

// Lease hands the oldest eligible job in pool to the lane's live
// generation: a pending job, or a retry_wait job whose retry_at <= now,
// whose plugin id is in plugins and (coding jobs) whose repository is in
// repositories. In one transaction it checks the generation is live and
// holds no leased attempt, creates the attempt (new random 32-hex id,
// ordinal = previous + 1, deadline = now + the job's lease TTL, the job's
// policy reference: the identical stored bytes), marks the job leased and records a "leased"
// event. It returns (nil, nil) when nothing is eligible. With
// ErrUnreplicated (sync replication: committed here, not confirmed by the
// replica) it returns the lease it granted too, so the caller can give it
// back (Release) instead of leaving the lane holding it until it expires;
// SubmitAndLease and CompleteAndLease do the same.
func (s *Store) Lease(ctx context.Context, lane, generation, pool string, plugins, repositories []string, now time.Time) (*Lease, error) {
	req := LeaseRequest{Lane: lane, Generation: generation, Pool: pool, Plugins: plugins, Repositories: repositories}
	if !req.valid() {
		return nil, invalid("malformed lease request")
	}
	us := now.UnixMicro()
	var out *Lease
	err := s.w.do(ctx, func(t *wtx) (err error) {
		out, err = t.lease(req, us)
		return err
	})
	if errors.Is(err, ErrUnreplicated) {
		return out, err
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *wtx) lease(req LeaseRequest, us int64) (*Lease, error) {
	// One read: the generation is the lane's live connection, and no
	// attempt is leased to it.
	var live, busy bool
	err := t.queryRow(`SELECT generation = ? AND connected = 1,
  EXISTS (SELECT 1 FROM attempts WHERE lane = ? AND generation = ? AND status = 'leased')
FROM lanes WHERE lane = ?`, req.Generation, req.Lane, req.Generation, req.Lane).Scan(&live, &busy)
	if isNoRows(err) {
		return nil, ErrStale
	}
	if err != nil {
		return nil, err
	}
	if !live {
		return nil, ErrStale
	}
	if busy {
		return nil, ErrLaneBusy
	}
	return t.grant(req, us)
}

// grant leases the oldest eligible job to the lane without checking that
// its generation is live and idle: callers have established both in the
// same transaction (lease, or a recorded result of the lane's only leased
// attempt in CompleteAndLease). The lease time is never before the job's
// last change: a caller reads its clock before it waits for the writer,
// and a submit that read a later clock can commit first.
func (t *wtx) grant(req LeaseRequest, us int64) (*Lease, error) {
	query, args := candidateSQL(req.Pool, us, req.Plugins, req.Repositories)
	var (
		seq, count, events, updated, pid, created int64
		task                                      string
		l                                         = Lease{AttemptID: newAttemptID()}
	)
	err := t.queryRow(query, args...).Scan(&seq, &l.JobID, &l.Kind, &task, &pid, &count, &events, &updated, &created)
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The plugin id, TTL, retry base and max attempts the job's columns
	// hold are the facts of its policy's bytes (both set at submit).
	pol, err := t.policyOf(pid)
	if err != nil {
		return nil, err
	}
	ttl, base, maxAttempts := pol.facts.leaseTTL, pol.facts.retryBase, pol.facts.maxAttempts
	l.PluginID = pol.facts.pluginID
	if l.Kind == KindCoding {
		var repo, branch, prepared, baseSHA sql.NullString
		if err := t.queryRow(`SELECT repository_id, default_branch, prepared_path, base_sha FROM jobs WHERE seq = ?`, seq).Scan(
			&repo, &branch, &prepared, &baseSHA); err != nil {
			return nil, err
		}
		l.RepositoryID, l.DefaultBranch, l.PreparedPath, l.BaseSHA = repo.String, branch.String, prepared.String, baseSHA.String
	}
	if pol.facts.budget.bounded() {
		if l.Budget, err = t.leaseBudget(seq, pol.facts.budget); err != nil {
			return nil, err
		}
	}
	us = max(us, updated)
	l.Ordinal = int(count) + 1
	l.Task, l.Policy = json.RawMessage(task), json.RawMessage(pol.body)
	l.LeasedAt, l.DeadlineAt = fromMicros(us).Time, fromMicros(us+ttl).Time
	if _, err := t.exec(`UPDATE jobs SET status = 'leased', current_attempt = ?, attempt_count = ?, event_count = ?,
  retry_at = NULL, updated_at = ? WHERE seq = ?`, l.AttemptID, l.Ordinal, events+1, us, seq); err != nil {
		return nil, err
	}
	if _, err := t.exec(`INSERT INTO attempts (job_seq, id, ordinal, lane, generation, policy_id, lease_ttl_us, kind,
  max_attempts, retry_base_us, status, leased_at, deadline_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'leased', ?, ?)`,
		seq, l.AttemptID, l.Ordinal, req.Lane, req.Generation, pid, ttl, l.Kind, maxAttempts, base, us, us+ttl); err != nil {
		return nil, err
	}
	t.events(seq, events+1, us, ev{typ: EventLeased, attempt: l.Ordinal})
	if l.Ordinal == 1 {
		t.waits = append(t.waits, us-created)
	}
	return &l, nil
}

// fenceRow is everything the fencing rules need about one attempt and its
// job. The attempt carries copies of its job's kind, max_attempts and
// retry base.
type fenceRow struct {
	jobSeq, jobEvents        int64
	jobStatus                string
	jobRetryAt               sql.NullInt64
	lane, generation, status string
	deadline, ttl            int64
	live                     bool
	digest                   []byte
	ordinal                  int
	kind                     string
	maxAttempts              int
	retryBase                int64
	evBatches, evRecords     int
	created, base            sql.NullString // the attempt's created candidate, the job's base
}

// loadFence reads, in the writer's transaction and in one statement, the
// job named by the fence, the attempt under it, and whether the attempt's
// generation is its lane's live connection. ErrNotFound: no such job or
// attempt.
func (t *wtx) loadFence(f Fence) (fenceRow, error) {
	var r fenceRow
	err := t.queryRow(`SELECT j.seq, j.event_count, j.status, j.retry_at, a.lane, a.generation, a.status, a.deadline_at,
  a.lease_ttl_us, a.outcome_digest, a.ordinal, a.kind, a.max_attempts, a.retry_base_us, a.evidence_batches,
  a.evidence_records, coalesce(l.connected = 1 AND l.generation = a.generation, 0), a.created_candidate, j.base_sha
FROM jobs j JOIN attempts a ON a.job_seq = j.seq AND a.id = ? LEFT JOIN lanes l ON l.lane = a.lane
WHERE j.id = ?`, f.AttemptID, f.JobID).Scan(
		&r.jobSeq, &r.jobEvents, &r.jobStatus, &r.jobRetryAt, &r.lane, &r.generation, &r.status, &r.deadline,
		&r.ttl, &r.digest, &r.ordinal, &r.kind, &r.maxAttempts, &r.retryBase, &r.evBatches, &r.evRecords, &r.live, &r.created, &r.base)
	if isNoRows(err) {
		return r, ErrNotFound
	}
	return r, err
}

// completeFence is loadFence for a result: the same join, with only the
// columns every result needs and the binding compared in the statement
// (bound); each column read costs more than the lookups. complete reads
// the replay and candidate columns separately, when it needs them.
func (t *wtx) completeFence(f Fence) (r fenceRow, bound bool, err error) {
	err = t.queryRow(`SELECT j.seq, j.event_count, a.status, a.deadline_at, a.ordinal, a.kind, a.max_attempts, a.retry_base_us,
  coalesce(l.connected = 1 AND l.generation = a.generation, 0), a.lane = ? AND a.generation = ?
FROM jobs j JOIN attempts a ON a.job_seq = j.seq AND a.id = ? LEFT JOIN lanes l ON l.lane = a.lane
WHERE j.id = ?`, f.Lane, f.Generation, f.AttemptID, f.JobID).Scan(
		&r.jobSeq, &r.jobEvents, &r.status, &r.deadline, &r.ordinal, &r.kind, &r.maxAttempts, &r.retryBase, &r.live, &bound)
	if isNoRows(err) {
		return r, false, ErrNotFound
	}
	return r, bound, err
}

// checkBinding: the attempt (found under the fence's job) is bound to
// exactly this lane and generation.
func checkBinding(r fenceRow, f Fence) error {
	if r.lane != f.Lane || r.generation != f.Generation {
		return ErrStale
	}
	return nil
}

// checkActive: the attempt is still leased, its generation is live and
// now is strictly before its deadline.
func checkActive(r fenceRow, us int64) error {
	switch r.status {
	case AttemptLeased:
	case AttemptExpired:
		return ErrExpired
	default:
		return ErrStale
	}
	if !r.live {
		return ErrStale
	}
	if us >= r.deadline {
		return ErrExpired
	}
	return nil
}

// activeFence loads the fence and requires an active, correctly bound
// attempt.
func (t *wtx) activeFence(f Fence, us int64) (fenceRow, error) {
	r, err := t.loadFence(f)
	if err != nil {
		return r, err
	}
	if err := checkBinding(r, f); err != nil {
		return r, err
	}
	return r, checkActive(r, us)
}

// fencedAttempt is the WHERE clause of every write to a fenced attempt: it
// re-checks, in the writing statement, that the attempt is still leased to
// this lane and generation and before its deadline. The lane's liveness
// was read by loadFence in the same transaction, and the single writer
// runs every transaction to completion before the next begins.
const fencedAttempt = `job_seq = ? AND id = ? AND lane = ? AND generation = ? AND status = 'leased' AND deadline_at > ?`

func fencedArgs(r fenceRow, f Fence, us int64) []any {
	return []any{r.jobSeq, f.AttemptID, f.Lane, f.Generation, us}
}

// execFenced runs a fenced write and fails with ErrStale if it matched no
// row (impossible after loadFence's checks within the writer's
// transaction; it is the SQL-level guard).
func (t *wtx) execFenced(query string, args ...any) error {
	res, err := t.exec(query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err != nil {
			return err
		}
		return ErrStale
	}
	return nil
}

// Heartbeat extends the fenced attempt's deadline to now + its persisted
// TTL (never shortening it), notes that the attempt was started (Release
// refuses it from then on), and returns the new deadline. It is valid only
// strictly before the current deadline, for a leased attempt bound to the
// lane's live generation.
func (s *Store) Heartbeat(ctx context.Context, f Fence, now time.Time) (time.Time, error) {
	return s.HeartbeatUsage(ctx, f, nil, now)
}

// HeartbeatUsage is Heartbeat that also records the attempt's model
// gateway usage so far (u; nil: none reported), never lowering a count
// already recorded: usage a lane reports with its heartbeats counts
// toward the job's budget even if the attempt then expires or is
// cancelled without a result.
func (s *Store) HeartbeatUsage(ctx context.Context, f Fence, u *Usage, now time.Time) (time.Time, error) {
	if err := validFence(f); err != nil {
		return time.Time{}, err
	}
	if u != nil && !u.valid() {
		return time.Time{}, invalid("usage counts out of range")
	}
	us := now.UnixMicro()
	var deadline int64
	err := s.w.do(ctx, func(t *wtx) error {
		r, err := t.activeFence(f, us)
		if err != nil {
			return err
		}
		deadline = max(r.deadline, us+r.ttl)
		return t.execFenced(`UPDATE attempts SET deadline_at = ?, heartbeat_at = ?, `+usageSet+` WHERE `+fencedAttempt,
			append(append([]any{deadline, us}, usageArgs(u)...), fencedArgs(r, f, us)...)...)
	})
	if err != nil {
		return time.Time{}, err
	}
	return fromMicros(deadline).Time, nil
}

// outcomeDigest is the identity of an outcome for replay comparison.
func outcomeDigest(o Outcome, report []byte) []byte {
	b, _ := json.Marshal(struct {
		S bool            `json:"s"`
		O *string         `json:"o,omitempty"`
		C string          `json:"c,omitempty"`
		R json.RawMessage `json:"r,omitempty"`
		D string          `json:"d,omitempty"`
		F string          `json:"f,omitempty"`
		U *Usage          `json:"u,omitempty"`
	}{o.Succeeded, o.Output, o.CandidateSHA, report, o.Disposition, o.FailureCode, o.Usage})
	sum := sha256.Sum256(b)
	return sum[:]
}

func validateOutcome(o Outcome) ([]byte, error) {
	if o.Usage != nil && !o.Usage.valid() {
		return nil, invalid("usage counts out of range")
	}
	if o.Succeeded {
		if o.Disposition != "" || o.FailureCode != "" {
			return nil, invalid("failure fields on success")
		}
		if (o.Output != nil) == (o.CandidateSHA != "") {
			return nil, invalid("success needs exactly one of output or candidate_sha")
		}
		if o.Output != nil && len(*o.Output) > MaxOutputBytes {
			return nil, invalid("output too large")
		}
		if o.CandidateSHA != "" && !ident.ValidSHA(o.CandidateSHA) {
			return nil, invalid("malformed candidate_sha")
		}
		if o.AgentReport == nil {
			return nil, nil
		}
		if o.CandidateSHA == "" || len(o.AgentReport) > MaxAgentReportBytes {
			return nil, invalid("unexpected or oversized agent report")
		}
		r, ok := compactObject(o.AgentReport)
		if !ok {
			return nil, invalid("agent report is not a JSON object")
		}
		return r, nil
	}
	if o.Output != nil || o.CandidateSHA != "" || o.AgentReport != nil {
		return nil, invalid("success fields on failure")
	}
	if o.Disposition != DispositionRetryable && o.Disposition != DispositionTerminal {
		return nil, invalid("unknown disposition")
	}
	if !ident.ValidCode(o.FailureCode) || o.FailureCode == CodeMaxAttemptsExceeded || o.FailureCode == CodeLeaseExpired {
		return nil, invalid("malformed failure code")
	}
	return nil, nil
}

// Complete records the fenced attempt's outcome. It is accepted only for
// the attempt currently bound to the lane's live generation, strictly
// before its deadline. Success finishes the job (text output becomes the
// job result, a candidate SHA the job's candidate); a candidate SHA must be
// the one the attempt's evidence recorded as created (AddEvidence) and not
// the job's base, or the result is ErrInvalid and nothing is written. A retryable failure
// schedules a retry at now + Backoff(retry_base, ordinal), or fails the job
// with max_attempts_exceeded on the last attempt; a terminal failure fails
// the job with the attempt's failure code. Replaying an identical outcome
// for an already finished attempt (same lane and generation) returns the
// recorded result with Replayed set and writes nothing; a different
// outcome is ErrConflict.
func (s *Store) Complete(ctx context.Context, f Fence, o Outcome, now time.Time) (Completion, error) {
	if err := validFence(f); err != nil {
		return Completion{}, err
	}
	report, err := validateOutcome(o)
	if err != nil {
		return Completion{}, err
	}
	us := now.UnixMicro()
	var c Completion
	err = s.w.do(ctx, func(t *wtx) (err error) {
		c, err = t.complete(f, o, report, us)
		return err
	})
	if err != nil {
		return Completion{}, err
	}
	return c, nil
}

// CompleteAndLease is Complete followed, in the same transaction (one
// commit instead of two), by Lease for the lane that sent the result: the
// lane is idle once its result is recorded. next must name the fence's
// lane and generation. The lease is attempted only when the result was
// recorded or replayed; a nil *Lease means nothing was eligible, or (a
// replay) the lane holds another attempt. It never returns ErrLaneBusy.
func (s *Store) CompleteAndLease(ctx context.Context, f Fence, o Outcome, next LeaseRequest, now time.Time) (Completion, *Lease, error) {
	if err := validFence(f); err != nil {
		return Completion{}, nil, err
	}
	if !next.valid() || next.Lane != f.Lane || next.Generation != f.Generation {
		return Completion{}, nil, invalid("malformed lease request")
	}
	report, err := validateOutcome(o)
	if err != nil {
		return Completion{}, nil, err
	}
	us := now.UnixMicro()
	var (
		c Completion
		l *Lease
	)
	err = s.w.do(ctx, func(t *wtx) (err error) {
		l = nil
		if c, err = t.complete(f, o, report, us); err != nil {
			return err
		}
		if c.Replayed {
			// Nothing was recorded: check the lane as Lease does. A
			// lane that holds another attempt is leased nothing; the
			// replay is still answered, so no request is ever refused
			// ErrLaneBusy.
			l, err = t.lease(next, us)
			if errors.Is(err, ErrLaneBusy) {
				l, err = nil, nil
			}
			return err
		}
		// The result was recorded for the lane's live generation (checked
		// by complete) and its attempt was the lane's only leased one
		// (Lease never grants a second), so the lane is live and idle.
		l, err = t.grant(next, us)
		return err
	})
	if errors.Is(err, ErrUnreplicated) {
		return Completion{}, l, err // the granted lease, to give back (see Lease)
	}
	if err != nil {
		return Completion{}, nil, err
	}
	return c, l, nil
}

func (t *wtx) complete(f Fence, o Outcome, report []byte, us int64) (Completion, error) {
	digest := outcomeDigest(o, report)
	var c Completion
	r, bound, err := t.completeFence(f)
	if err != nil {
		return c, err
	}
	if !bound {
		return c, ErrStale
	}
	if r.status == AttemptSucceeded || r.status == AttemptFailed {
		// A replay: an identical outcome is answered from the job, a
		// different one is a conflict. Nothing is written.
		if err := t.queryRow(`SELECT a.outcome_digest, j.status, j.retry_at FROM jobs j JOIN attempts a ON a.job_seq = j.seq AND a.id = ?
WHERE j.seq = ?`, f.AttemptID, r.jobSeq).Scan(&r.digest, &r.jobStatus, &r.jobRetryAt); err != nil {
			return c, err
		}
		if !bytes.Equal(r.digest, digest) {
			return c, ErrConflict
		}
		c = Completion{JobStatus: r.jobStatus, Replayed: true}
		if r.jobRetryAt.Valid {
			c.RetryAt = fromMicros(r.jobRetryAt.Int64).Time
		}
		return c, nil
	}
	if err := checkActive(r, us); err != nil {
		return c, err
	}
	if o.Succeeded {
		if (r.kind == KindText) != (o.Output != nil) {
			return c, invalid("result kind does not match the job")
		}
		if o.CandidateSHA != "" {
			if err := t.queryRow(`SELECT a.created_candidate, j.base_sha FROM jobs j JOIN attempts a ON a.job_seq = j.seq AND a.id = ?
WHERE j.seq = ?`, f.AttemptID, r.jobSeq).Scan(&r.created, &r.base); err != nil {
				return c, err
			}
		}
		if o.CandidateSHA != "" && (r.created.String != o.CandidateSHA || r.created == r.base) {
			// Success must name the candidate the attempt's acknowledged
			// evidence created (so every task check passed on it), never
			// the job's base.
			return c, invalid("candidate not created by the attempt's evidence")
		}
		var result, rep any
		if o.Output != nil {
			result = *o.Output
		}
		if report != nil {
			rep = report
		}
		// The statement itself re-checks the created candidate.
		if err := t.execFenced(`UPDATE attempts SET status = 'succeeded', completed_at = ?, candidate_sha = ?,
  agent_report = ?, outcome_digest = ?, `+usageSet+` WHERE `+fencedAttempt+` AND (? = '' OR created_candidate = ?)`,
			append(append(append([]any{us, nullable(o.CandidateSHA), rep, digest}, usageArgs(o.Usage)...), fencedArgs(r, f, us)...),
				o.CandidateSHA, o.CandidateSHA)...); err != nil {
			return c, err
		}
		if o.CandidateSHA != "" {
			c.JobStatus, err = t.succeedCoding(r.jobSeq, r.jobEvents, r.ordinal, f.JobID, o.CandidateSHA, us)
			return c, err
		}
		c.JobStatus = JobSucceeded
		return c, t.finishSucceeded(r.jobSeq, r.jobEvents, r.ordinal, result, "", us)
	}
	if err := t.execFenced(`UPDATE attempts SET status = 'failed', completed_at = ?, disposition = ?, failure_code = ?,
  outcome_digest = ?, `+usageSet+` WHERE `+fencedAttempt,
		append(append([]any{us, o.Disposition, o.FailureCode, digest}, usageArgs(o.Usage)...), fencedArgs(r, f, us)...)...); err != nil {
		return c, err
	}
	status, retryAt := nextAfterFailure(r, o.Disposition == DispositionRetryable, us)
	terminalCode := ""
	if o.Disposition == DispositionTerminal {
		terminalCode = o.FailureCode
	}
	first := ev{typ: EventAttemptFailed, attempt: r.ordinal, code: o.FailureCode}
	if err := t.finishJob(r.jobSeq, r.jobEvents, r.ordinal, status, retryAt, terminalCode, us, first); err != nil {
		return c, err
	}
	c.JobStatus = status
	if status == JobRetryWait {
		c.RetryAt = fromMicros(retryAt).Time
	}
	return c, nil
}

// nextAfterFailure decides where a job goes after its attempt failed or
// expired: retry_wait with retry_at = now + Backoff when retryable and
// attempts remain, otherwise failed.
func nextAfterFailure(r fenceRow, retryable bool, us int64) (string, int64) {
	if retryable && r.ordinal < r.maxAttempts {
		d := policy.Backoff(time.Duration(r.retryBase)*time.Microsecond, r.ordinal)
		return JobRetryWait, us + d.Microseconds()
	}
	return JobFailed, 0
}

// finishJob moves a job out of leased after a failed or expired attempt
// and records first (attempt_failed or expired) followed by
// retry_scheduled or failed. A terminal failure keeps its code; a
// retryable one that ran out of attempts becomes max_attempts_exceeded.
func (t *wtx) finishJob(jobSeq, jobEvents int64, ordinal int, status string, retryAt int64, terminalCode string, us int64, first ev) error {
	events := jobEvents + 2
	if status == JobRetryWait {
		if _, err := t.exec(`UPDATE jobs SET status = 'retry_wait', current_attempt = NULL, retry_at = ?,
  event_count = ?, updated_at = ? WHERE seq = ?`, retryAt, events, us, jobSeq); err != nil {
			return err
		}
		t.events(jobSeq, events, us, first, ev{typ: EventRetryScheduled, attempt: ordinal})
		return nil
	}
	code := terminalCode
	if code == "" {
		code = CodeMaxAttemptsExceeded
	}
	if _, err := t.exec(`UPDATE jobs SET status = 'failed', current_attempt = NULL, failure_code = ?,
  event_count = ?, updated_at = ? WHERE seq = ?`, code, events, us, jobSeq); err != nil {
		return err
	}
	t.events(jobSeq, events, us, first, ev{typ: EventFailed, attempt: ordinal, code: code})
	return nil
}

// querier is what read helpers need: *sql.Tx and *sql.Conn satisfy it.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// read runs f against a consistent snapshot: a read-only transaction on the
// reader pool for file databases, or (memory databases, whose single
// connection holds the data) an uncounted operation on the writer.
func (s *Store) read(ctx context.Context, f func(q querier) error) error {
	if s.rdb == nil {
		return s.w.submit(ctx, &op{read: true, ctx: ctx, done: make(chan error, 1),
			fn: func(t *wtx) error { return f(t.w.conn) }})
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return f(tx)
}

const jobColumns = `seq, id, kind, status, failure_code, result, candidate_sha, repository_id, attempt_count,
  retry_at, created_at, updated_at, pool, plugin_id,
  base_sha, test_args, ` + deliveryViewColumn

type scanner interface{ Scan(dest ...any) error }

func scanJob(sc scanner) (Job, int64, error) {
	var (
		seq                        int64
		j                          Job
		failure, sha, repo, result sql.NullString
		base, tests, delivery      sql.NullString
		retryAt                    sql.NullInt64
		created, updated           int64
	)
	if err := sc.Scan(&seq, &j.ID, &j.Kind, &j.Status, &failure, &result, &sha, &repo, &j.AttemptCount,
		&retryAt, &created, &updated, &j.Pool, &j.PluginID, &base, &tests, &delivery); err != nil {
		return Job{}, 0, err
	}
	var err error
	if j.Delivery, err = decodeDeliveryView(delivery); err != nil {
		return Job{}, 0, err
	}
	j.FailureCode, j.CandidateSHA, j.RepositoryID, j.BaseSHA = failure.String, sha.String, repo.String, base.String
	if tests.Valid {
		if j.TestArgCounts, err = decodeTestArgs(tests.String); err != nil {
			return Job{}, 0, err
		}
	}
	if result.Valid {
		r := result.String
		j.Result = &r
	}
	if retryAt.Valid {
		t := fromMicros(retryAt.Int64)
		j.RetryAt = &t
	}
	j.CreatedAt, j.UpdatedAt = fromMicros(created), fromMicros(updated)
	return j, seq, nil
}

// readJob returns the job with id and its seq (the key of its attempts,
// events and evidence).
func readJob(ctx context.Context, q querier, id string) (Job, int64, error) {
	j, seq, err := scanJob(q.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if isNoRows(err) {
		return Job{}, 0, ErrNotFound
	}
	return j, seq, err
}

// readEvents returns the job's events with seq > after, at most limit.
func readEvents(ctx context.Context, q querier, jobSeq, after int64, limit int) ([]Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, type, at, attempt, code FROM events
WHERE job_seq = ? AND seq > ? ORDER BY seq LIMIT ?`, jobSeq, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	events := []Event{}
	for rows.Next() {
		var (
			e       Event
			at      int64
			attempt sql.NullInt64
			code    sql.NullString
		)
		if err := rows.Scan(&e.Seq, &e.Type, &at, &attempt, &code); err != nil {
			return nil, err
		}
		e.At, e.Attempt, e.Code = fromMicros(at), int(attempt.Int64), code.String
		events = append(events, e)
	}
	return events, rows.Err()
}

// Job returns the job with id, or ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (Job, error) {
	if !ident.ValidRef(id) {
		return Job{}, ErrNotFound
	}
	var j Job
	err := s.read(ctx, func(q querier) (err error) {
		var seq int64
		if j, seq, err = readJob(ctx, q, id); err != nil {
			return err
		}
		j.Usage, err = readJobUsage(ctx, q, seq)
		return err
	})
	return j, err
}

// Events returns the job's events in order (Seq from 1), or ErrNotFound.
func (s *Store) Events(ctx context.Context, id string) ([]Event, error) {
	if !ident.ValidRef(id) {
		return nil, ErrNotFound
	}
	var events []Event
	err := s.read(ctx, func(q querier) error {
		_, seq, err := readJob(ctx, q, id)
		if err != nil {
			return err
		}
		events, err = readEvents(ctx, q, seq, 0, -1)
		return err
	})
	return events, err
}

// Aggregate returns the job, its attempts ordered by ordinal (evidence
// nested, ordered by batch and position) and its ordered events, all from
// one snapshot; or ErrNotFound.
func (s *Store) Aggregate(ctx context.Context, id string) (Aggregate, error) {
	if !ident.ValidRef(id) {
		return Aggregate{}, ErrNotFound
	}
	var a Aggregate
	err := s.read(ctx, func(q querier) (err error) {
		a = Aggregate{}
		var seq int64
		if a.Job, seq, err = readJob(ctx, q, id); err != nil {
			return err
		}
		if a.Attempts, err = readAttempts(ctx, q, seq); err != nil {
			return err
		}
		if a.Job.Usage, err = readJobUsage(ctx, q, seq); err != nil {
			return err
		}
		a.Events, err = readEvents(ctx, q, seq, 0, -1)
		return err
	})
	return a, err
}

// readJobUsage sums the usage of the job's metered attempts (nil when
// none was metered). Each count is at most MaxUsage and a job has at most
// policy.MaxMaxAttempts attempts, so the sums fit; they are capped at
// MaxUsage like every count.
func readJobUsage(ctx context.Context, q querier, jobSeq int64) (*Usage, error) {
	var n int64
	var u Usage
	if err := q.QueryRowContext(ctx, `SELECT count(usage_requests), coalesce(sum(usage_requests), 0),
  coalesce(sum(usage_input_tokens), 0), coalesce(sum(usage_output_tokens), 0), coalesce(sum(usage_cached_tokens), 0)
FROM attempts WHERE job_seq = ?`, jobSeq).Scan(&n, &u.Requests, &u.InputTokens, &u.OutputTokens, &u.CachedTokens); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	u = u.capped()
	return &u, nil
}

func readAttempts(ctx context.Context, q querier, jobSeq int64) ([]Attempt, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, ordinal, status, lane, leased_at, deadline_at, completed_at,
  disposition, failure_code, candidate_sha, agent_report,
  usage_requests, usage_input_tokens, usage_output_tokens, usage_cached_tokens
FROM attempts WHERE job_seq = ? ORDER BY ordinal`, jobSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	attempts := []Attempt{}
	index := map[string]int{}
	for rows.Next() {
		var (
			a                       Attempt
			leased, deadline        int64
			completed               sql.NullInt64
			disp, code, sha, report sql.NullString
			req, in, out, cached    sql.NullInt64
		)
		if err := rows.Scan(&a.ID, &a.Ordinal, &a.Status, &a.WorkerID, &leased, &deadline, &completed,
			&disp, &code, &sha, &report, &req, &in, &out, &cached); err != nil {
			return nil, err
		}
		if req.Valid && in.Valid && out.Valid && cached.Valid {
			a.Usage = &Usage{Requests: req.Int64, InputTokens: in.Int64, OutputTokens: out.Int64, CachedTokens: cached.Int64}
		}
		a.LeasedAt, a.DeadlineAt = fromMicros(leased), fromMicros(deadline)
		if completed.Valid {
			a.CompletedAt = fromMicrosPtr(&completed.Int64)
		}
		a.Disposition, a.FailureCode, a.CandidateSHA = disp.String, code.String, sha.String
		if report.Valid {
			a.AgentReport = json.RawMessage(report.String)
		}
		a.Evidence = []json.RawMessage{}
		index[a.ID] = len(attempts)
		attempts = append(attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if len(attempts) == 0 {
		return attempts, nil
	}
	ev, err := q.QueryContext(ctx, `SELECT attempt_id, record FROM evidence WHERE job_seq = ?
ORDER BY attempt_id, batch, idx`, jobSeq)
	if err != nil {
		return nil, err
	}
	defer ev.Close()
	for ev.Next() {
		var id, rec string
		if err := ev.Scan(&id, &rec); err != nil {
			return nil, err
		}
		if i, ok := index[id]; ok {
			attempts[i].Evidence = append(attempts[i].Evidence, json.RawMessage(rec))
		}
	}
	return attempts, ev.Err()
}

// NextDue returns the earliest leased deadline or retry_at, and false when
// no attempt is leased and no job waits for a retry.
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var (
		t  time.Time
		ok bool
	)
	err := s.read(ctx, func(q querier) (err error) {
		t, ok, err = nextDue(ctx, q)
		return err
	})
	return t, ok, err
}

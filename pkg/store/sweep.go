package store

import (
	"context"
	"database/sql"
	"time"
)

// Sweep expires every leased attempt whose deadline is <= now: the attempt
// becomes expired (failure code lease_expired, event "expired") and its job
// goes to retry_wait with backoff, or fails with max_attempts_exceeded on
// its last attempt. It returns what it expired (so the Gate can cancel
// those lanes) and the next due time.
func (s *Store) Sweep(ctx context.Context, now time.Time) (SweepResult, error) {
	us := now.UnixMicro()
	var res SweepResult
	err := s.w.do(ctx, func(t *wtx) error {
		res = SweepResult{}
		rows, err := t.query(`SELECT a.job_seq, a.id, j.id, a.ordinal, a.lane, a.generation, a.max_attempts, a.retry_base_us,
  j.event_count
FROM attempts a JOIN jobs j ON j.seq = a.job_seq
WHERE a.status = 'leased' AND a.deadline_at <= ? ORDER BY a.deadline_at, a.id`, us)
		if err != nil {
			return err
		}
		var due []fenceRow
		var ids, jobIDs []string
		for rows.Next() {
			var r fenceRow
			var id, jobID string
			if err := rows.Scan(&r.jobSeq, &id, &jobID, &r.ordinal, &r.lane, &r.generation, &r.maxAttempts,
				&r.retryBase, &r.jobEvents); err != nil {
				rows.Close()
				return err
			}
			due = append(due, r)
			ids, jobIDs = append(ids, id), append(jobIDs, jobID)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i, r := range due {
			status, retryAt := nextAfterFailure(r, true, us)
			if _, err := t.exec(`UPDATE attempts SET status = 'expired', completed_at = ?, failure_code = ?
WHERE job_seq = ? AND id = ? AND status = 'leased'`, us, CodeLeaseExpired, r.jobSeq, ids[i]); err != nil {
				return err
			}
			if err := t.finishJob(r.jobSeq, r.jobEvents, r.ordinal, status, retryAt, "", us, ev{typ: EventExpired, attempt: r.ordinal}); err != nil {
				return err
			}
			e := Expiry{JobID: jobIDs[i], AttemptID: ids[i], Ordinal: r.ordinal, Lane: r.lane, Generation: r.generation, JobStatus: status}
			if status == JobRetryWait {
				e.RetryAt = fromMicros(retryAt).Time
			}
			res.Expired = append(res.Expired, e)
		}
		next, ok, err := scanNextDue(t.queryRow(nextDueSQL)) // prepared once, not per sweep
		res.NextDue, res.HasNext = next, ok
		return err
	})
	if err != nil {
		return SweepResult{}, err
	}
	return res, nil
}

const nextDueSQL = `SELECT min(t) FROM (
  SELECT min(deadline_at) AS t FROM attempts WHERE status = 'leased'
  UNION ALL
  SELECT min(retry_at) FROM jobs WHERE status = 'retry_wait')`

func nextDue(ctx context.Context, q querier) (time.Time, bool, error) {
	return scanNextDue(q.QueryRowContext(ctx, nextDueSQL))
}

func scanNextDue(row *sql.Row) (time.Time, bool, error) {
	var t sql.NullInt64
	if err := row.Scan(&t); err != nil {
		return time.Time{}, false, err
	}
	if !t.Valid {
		return time.Time{}, false, nil
	}
	return fromMicros(t.Int64).Time, true, nil
}

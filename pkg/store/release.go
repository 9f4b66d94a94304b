package store

import (
	"context"
	"database/sql"
	"time"
)

// Released names the pool, plugin and repository of the job whose lease
// Release returned, so the caller can wake a lane that fits it.
type Released struct {
	Pool, PluginID, RepositoryID string
}

// Release returns a lease that was never started to the queue: the
// attempt bound to the fence's lane and generation, still leased (its
// deadline may have passed; the sweep has not expired it) and never
// started (no heartbeat, no evidence), is removed, and the job goes back to where the lease found it
// (pending for a first attempt, otherwise retry_wait, due at once) with
// its attempt count restored, so the lease consumed no attempt. A
// "released" event records it. ErrStale: not bound to this lane and
// generation, or already finished; ErrExpired: the sweep expired it;
// ErrConflict: it was started (a heartbeat or evidence was recorded for
// it); ErrNotFound: no
// such job or attempt.
func (s *Store) Release(ctx context.Context, f Fence, now time.Time) (Released, error) {
	if err := validFence(f); err != nil {
		return Released{}, err
	}
	us := now.UnixMicro()
	var out Released
	err := s.w.do(ctx, func(t *wtx) error {
		out = Released{}
		var (
			jobSeq, events, updated, leasedAt int64
			ordinal, batches                  int
			lane, generation, status          string
			repo                              sql.NullString
			heartbeat                         sql.NullInt64
			r                                 Released
		)
		err := t.queryRow(`SELECT j.seq, j.event_count, j.updated_at, j.pool, j.plugin_id, j.repository_id,
  a.ordinal, a.lane, a.generation, a.status, a.leased_at, a.evidence_batches, a.heartbeat_at
FROM jobs j JOIN attempts a ON a.job_seq = j.seq AND a.id = ? WHERE j.id = ?`, f.AttemptID, f.JobID).Scan(
			&jobSeq, &events, &updated, &r.Pool, &r.PluginID, &repo,
			&ordinal, &lane, &generation, &status, &leasedAt, &batches, &heartbeat)
		if isNoRows(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		switch {
		case lane != f.Lane || generation != f.Generation:
			return ErrStale
		case status == AttemptExpired:
			return ErrExpired
		case status != AttemptLeased:
			return ErrStale
		case batches > 0, heartbeat.Valid:
			return ErrConflict
		}
		us = max(us, updated)
		if err := t.execFenced(`DELETE FROM attempts WHERE job_seq = ? AND id = ? AND lane = ? AND generation = ?
  AND status = 'leased' AND evidence_batches = 0 AND heartbeat_at IS NULL`, jobSeq, f.AttemptID, f.Lane, f.Generation); err != nil {
			return err
		}
		// The job was pending before a first attempt; before a later one it
		// was a retry due no later than the lease.
		jobStatus, retryAt := JobPending, any(nil)
		if ordinal > 1 {
			jobStatus, retryAt = JobRetryWait, leasedAt
		}
		if err := t.execFenced(`UPDATE jobs SET status = ?, current_attempt = NULL, attempt_count = ?, retry_at = ?,
  event_count = ?, updated_at = ? WHERE seq = ? AND current_attempt = ?`,
			jobStatus, ordinal-1, retryAt, events+1, us, jobSeq, f.AttemptID); err != nil {
			return err
		}
		t.events(jobSeq, events+1, us, ev{typ: EventReleased, attempt: ordinal})
		r.RepositoryID = repo.String
		out = r
		return nil
	})
	if err != nil {
		return Released{}, err
	}
	return out, nil
}

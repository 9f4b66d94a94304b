package store

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// SourceAttempt is what the Gate needs to serve a public-source attempt's
// base or take its candidate: the job's prepared repository, base and
// task (for the commit identities it allows).
type SourceAttempt struct {
	RepositoryID string
	PreparedPath string
	BaseSHA      string
	Task         []byte
}

// SourceAttempt checks, without writing, that the fenced attempt is the
// active lease of a public-source coding job on the lane's live
// generation, that the lane belongs to workerID, and that now is strictly
// before the attempt's deadline; it returns the job's source. ErrNotFound:
// no such job or attempt, or the job is not a public-source coding job;
// ErrStale: bound elsewhere, finished or superseded; ErrExpired: past its
// deadline or expired.
func (s *Store) SourceAttempt(ctx context.Context, f Fence, workerID string, now time.Time) (SourceAttempt, error) {
	if err := validFence(f); err != nil {
		return SourceAttempt{}, err
	}
	var (
		sa                         SourceAttempt
		lane, gen, status, worker  string
		prepared, base, repo, task sql.NullString
		deadline                   int64
		live                       bool
	)
	err := s.read(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `SELECT j.repository_id, j.prepared_path, j.base_sha, j.task, a.lane, a.generation, a.status,
  a.deadline_at, coalesce(l.connected = 1 AND l.generation = a.generation, 0), coalesce(l.worker_id, '')
FROM jobs j JOIN attempts a ON a.job_seq = j.seq AND a.id = ? LEFT JOIN lanes l ON l.lane = a.lane
WHERE j.id = ? AND j.kind = 'coding'`, f.AttemptID, f.JobID).Scan(
			&repo, &prepared, &base, &task, &lane, &gen, &status, &deadline, &live, &worker)
	})
	if isNoRows(err) {
		return SourceAttempt{}, ErrNotFound
	}
	if err != nil {
		return SourceAttempt{}, err
	}
	if !prepared.Valid || prepared.String == "" || !base.Valid {
		return SourceAttempt{}, ErrNotFound
	}
	r := fenceRow{lane: lane, generation: gen, status: status, deadline: deadline, live: live}
	if err := checkBinding(r, f); err != nil || worker != workerID {
		return SourceAttempt{}, ErrStale
	}
	if err := checkActive(r, now.UnixMicro()); err != nil {
		return SourceAttempt{}, err
	}
	sa.RepositoryID, sa.PreparedPath, sa.BaseSHA, sa.Task = repo.String, prepared.String, base.String, []byte(task.String)
	return sa, nil
}

// JobSource returns a coding job's repository id and prepared repository
// ("" for a static registration or a text job), or ErrNotFound.
func (s *Store) JobSource(ctx context.Context, jobID string) (repositoryID, prepared string, err error) {
	if !ident.ValidRef(jobID) {
		return "", "", ErrNotFound
	}
	var repo, path sql.NullString
	err = s.read(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `SELECT repository_id, prepared_path FROM jobs WHERE id = ?`, jobID).Scan(&repo, &path)
	})
	if isNoRows(err) {
		return "", "", ErrNotFound
	}
	return repo.String, path.String, err
}

// maxFinishedQuery bounds the job ids one query of FinishedBefore names.
const maxFinishedQuery = 500

// openBasesQuery is OpenBases' union: each part reads one partial index
// of live rows (INDEXED BY: a query that could not use it fails instead of
// scanning every job), the live rows first (CROSS JOIN keeps SQLite from
// putting jobs outside).
const openBasesQuery = `SELECT base_sha FROM jobs INDEXED BY jobs_ready
  WHERE status IN ('pending', 'retry_wait') AND prepared_path = ?1 AND base_sha IS NOT NULL
UNION SELECT j.base_sha FROM attempts a INDEXED BY attempts_leased CROSS JOIN jobs j ON j.seq = a.job_seq
  WHERE a.status = 'leased' AND j.status = 'leased' AND j.prepared_path = ?1 AND j.base_sha IS NOT NULL
UNION SELECT j.base_sha FROM deliveries d INDEXED BY deliveries_active CROSS JOIN jobs j ON j.seq = d.job_seq
  WHERE d.phase <> 'merged' AND d.phase <> 'failed' AND j.status = 'delivering' AND j.prepared_path = ?1 AND j.base_sha IS NOT NULL`

// FinishedBefore returns which of jobIDs are jobs that finished
// (succeeded or failed, their delivery over) before the given time. Ids
// the store does not know are not returned.
func (s *Store) FinishedBefore(ctx context.Context, jobIDs []string, before time.Time) (map[string]bool, error) {
	done := map[string]bool{}
	var ids []any
	for _, id := range jobIDs {
		if ident.ValidRef(id) {
			ids = append(ids, id)
		}
	}
	for len(ids) > 0 {
		n := min(len(ids), maxFinishedQuery)
		chunk := ids[:n]
		ids = ids[n:]
		err := s.read(ctx, func(q querier) error {
			rows, err := q.QueryContext(ctx, `SELECT id FROM jobs WHERE id IN (?`+strings.Repeat(",?", len(chunk)-1)+`)
  AND (status = 'succeeded' OR status = 'failed') AND updated_at < ?`, append(chunk, before.UnixMicro())...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				done[id] = true
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return done, nil
}

// OpenBases returns the distinct bases of the jobs prepared in the
// repository prepared that have not finished (pending, leased, waiting
// for a retry or delivering): what that repository must keep. It reads
// the live jobs through the partial indexes that hold only them (ready
// jobs, leased attempts, active deliveries), never the finished jobs,
// which grow without bound.
func (s *Store) OpenBases(ctx context.Context, prepared string) ([]string, error) {
	var bases []string
	err := s.read(ctx, func(q querier) error {
		bases = nil
		rows, err := q.QueryContext(ctx, openBasesQuery, prepared)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b string
			if err := rows.Scan(&b); err != nil {
				return err
			}
			bases = append(bases, b)
		}
		return rows.Err()
	})
	return bases, err
}

package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// MaxDebugLimit caps every debug listing.
const MaxDebugLimit = 1000

// LaneState is one Worker lane and its connection state, for the debug
// viewer. The current lease is the leased attempt bound to the lane's
// live generation, if any. Absent times are zero.
type LaneState struct {
	Lane           string
	WorkerID       string
	Slot           int
	Connected      bool
	ConnectedAt    time.Time
	DisconnectedAt time.Time
	JobID          string
	AttemptID      string
}

func clampLimit(limit int) int {
	return min(max(limit, 0), MaxDebugLimit)
}

// DebugJobs lists jobs newest first (submission order, which is
// created_at order for a monotonic clock), starting strictly after the job
// with id afterID ("" starts at the newest; an unknown id yields nothing).
func (s *Store) DebugJobs(ctx context.Context, afterID string, limit int) ([]Job, error) {
	limit = clampLimit(limit)
	var jobs []Job
	err := s.read(ctx, func(q querier) error {
		jobs = []Job{}
		var rows *sql.Rows
		var err error
		if afterID == "" {
			rows, err = q.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs ORDER BY seq DESC LIMIT ?`, limit)
		} else {
			rows, err = q.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs
WHERE seq < (SELECT seq FROM jobs WHERE id = ?) ORDER BY seq DESC LIMIT ?`, afterID, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, _, err := scanJob(rows)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	return jobs, err
}

// DebugLanes lists lanes ordered by name, strictly after the lane named
// after ("" starts at the first).
func (s *Store) DebugLanes(ctx context.Context, after string, limit int) ([]LaneState, error) {
	limit = clampLimit(limit)
	var lanes []LaneState
	err := s.read(ctx, func(q querier) error {
		lanes = []LaneState{}
		rows, err := q.QueryContext(ctx, `SELECT l.lane, l.worker_id, l.slot, l.connected, l.connected_at, l.disconnected_at,
  j.id, a.id
FROM lanes l LEFT JOIN attempts a
  ON a.lane = l.lane AND a.generation = l.generation AND a.status = 'leased' AND l.connected = 1
LEFT JOIN jobs j ON j.seq = a.job_seq
WHERE l.lane > ? ORDER BY l.lane LIMIT ?`, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				l            LaneState
				connectedAt  int64
				disconnected sql.NullInt64
				job, attempt sql.NullString
			)
			if err := rows.Scan(&l.Lane, &l.WorkerID, &l.Slot, &l.Connected, &connectedAt, &disconnected, &job, &attempt); err != nil {
				return err
			}
			l.ConnectedAt = fromMicros(connectedAt).Time
			if disconnected.Valid {
				l.DisconnectedAt = fromMicros(disconnected.Int64).Time
			}
			l.JobID, l.AttemptID = job.String, attempt.String
			lanes = append(lanes, l)
		}
		return rows.Err()
	})
	return lanes, err
}

// DebugJob returns one job and its attempts ordered by ordinal (with
// evidence, which debug views must not render), or ErrNotFound.
func (s *Store) DebugJob(ctx context.Context, id string) (Job, []Attempt, error) {
	a, err := s.Aggregate(ctx, id)
	if err != nil {
		return Job{}, nil, err
	}
	return a.Job, a.Attempts, nil
}

// DebugEvents lists a job's events with Seq > afterSeq, in order, or
// ErrNotFound for an unknown job.
func (s *Store) DebugEvents(ctx context.Context, id string, afterSeq int64, limit int) ([]Event, error) {
	if !ident.ValidRef(id) {
		return nil, ErrNotFound
	}
	limit = clampLimit(limit)
	var events []Event
	err := s.read(ctx, func(q querier) error {
		_, seq, err := readJob(ctx, q, id)
		if err != nil {
			return err
		}
		events, err = readEvents(ctx, q, seq, afterSeq, limit)
		return err
	})
	return events, err
}

package store

import (
	"context"
	"database/sql"
	"time"
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

// DebugJobs lists jobs newest first (created_at, then id, descending),
// strictly after the position (afterCreatedAt, afterID); a zero
// afterCreatedAt starts at the newest job.
func (s *Store) DebugJobs(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) ([]Job, error) {
	limit = clampLimit(limit)
	var jobs []Job
	err := s.read(ctx, func(q querier) error {
		jobs = []Job{}
		var rows *sql.Rows
		var err error
		if afterCreatedAt.IsZero() {
			rows, err = q.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs ORDER BY created_at DESC, id DESC LIMIT ?`, limit)
		} else {
			at := afterCreatedAt.UnixMicro()
			rows, err = q.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs
WHERE created_at < ?1 OR (created_at = ?1 AND id < ?2) ORDER BY created_at DESC, id DESC LIMIT ?3`, at, afterID, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
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
  a.job_id, a.id
FROM lanes l LEFT JOIN attempts a
  ON a.lane = l.lane AND a.generation = l.generation AND a.status = 'leased' AND l.connected = 1
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
	if !validRef(id) {
		return nil, ErrNotFound
	}
	limit = clampLimit(limit)
	var events []Event
	err := s.read(ctx, func(q querier) error {
		if _, err := readJob(ctx, q, id); err != nil {
			return err
		}
		events = []Event{}
		rows, err := q.QueryContext(ctx, `SELECT seq, type, at, attempt, code FROM (
  SELECT row_number() OVER (ORDER BY id) AS seq, type, at, attempt, code FROM events WHERE job_id = ?)
WHERE seq > ? ORDER BY seq LIMIT ?`, id, afterSeq, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e       Event
				at      int64
				attempt sql.NullInt64
				code    sql.NullString
			)
			if err := rows.Scan(&e.Seq, &e.Type, &at, &attempt, &code); err != nil {
				return err
			}
			e.At, e.Attempt, e.Code = fromMicros(at), int(attempt.Int64), code.String
			events = append(events, e)
		}
		return rows.Err()
	})
	return events, err
}

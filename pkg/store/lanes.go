package store

import (
	"context"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// ConnectLane records generation as the lane's live connection. A previous
// generation of the same lane is fenced from then on: nothing bound to it
// (heartbeat, evidence, result, lease) is accepted, and its leased attempt
// runs out at its deadline and is expired by Sweep.
func (s *Store) ConnectLane(ctx context.Context, lane, workerID string, slot int, generation string, now time.Time) error {
	if !ident.ValidLane(lane) || !ident.ValidID(workerID) || slot < 0 || slot > ident.MaxSlot || !ident.ValidRef(generation) {
		return invalid("malformed lane")
	}
	us := now.UnixMicro()
	return s.w.do(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO lanes (lane, worker_id, slot, generation, connected, connected_at, disconnected_at)
VALUES (?, ?, ?, ?, 1, ?, NULL)
ON CONFLICT (lane) DO UPDATE SET worker_id = excluded.worker_id, slot = excluded.slot,
  generation = excluded.generation, connected = 1, connected_at = excluded.connected_at, disconnected_at = NULL`,
			lane, workerID, slot, generation, us)
		return err
	})
}

// DisconnectLane marks the lane offline only if generation is still its
// live connection (compare-and-clear), so a replaced connection ending late
// never marks its replacement offline. It reports whether it changed
// anything.
func (s *Store) DisconnectLane(ctx context.Context, lane, generation string, now time.Time) (bool, error) {
	if !ident.ValidLane(lane) || !ident.ValidRef(generation) {
		return false, invalid("malformed lane")
	}
	us := now.UnixMicro()
	var changed bool
	err := s.w.do(ctx, func(t *wtx) error {
		res, err := t.exec(`UPDATE lanes SET connected = 0, disconnected_at = ?
WHERE lane = ? AND generation = ? AND connected = 1`, us, lane, generation)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	return changed, err
}

// MarkAllLanesDisconnected marks every lane offline; the Gate calls it at
// startup, before serving, because no connection survives a restart. It
// returns how many lanes it changed.
func (s *Store) MarkAllLanesDisconnected(ctx context.Context, now time.Time) (int, error) {
	us := now.UnixMicro()
	var n int64
	err := s.w.do(ctx, func(t *wtx) error {
		res, err := t.exec(`UPDATE lanes SET connected = 0, disconnected_at = ? WHERE connected = 1`, us)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

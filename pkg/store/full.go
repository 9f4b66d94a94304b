package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
)

// Storage failures. The writer wraps SQLite's result codes in them, so the
// Gate can tell a full disk (read-only storage_full mode, DECISIONS 20)
// from a broken store without knowing SQLite.
var (
	// ErrFull: SQLite could not write because the file system is full
	// (SQLITE_FULL). The transaction was rolled back: nothing it carried is
	// durable, and no caller in it was answered nil.
	ErrFull = errors.New("store: storage is full")
	// ErrStorageIO: an I/O error (SQLITE_IOERR and its extended codes).
	// SQLite reports some ENOSPC cases this way (growing the -shm file, a
	// failed fsync); the Gate judges them by the free space it sees. The
	// transaction was rolled back as for ErrFull.
	ErrStorageIO = errors.New("store: storage i/o error")
)

// SQLite's primary result codes the writer classifies.
const (
	sqliteIOErr = 10
	sqliteFull  = 13
)

// classify wraps an SQLite FULL or IOERR error in ErrFull or ErrStorageIO
// (the original stays in the chain); anything else is returned as is.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrFull) || errors.Is(err, ErrStorageIO) {
		return err
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqliteFull:
		return fmt.Errorf("%w: %w", ErrFull, err)
	case sqliteIOErr:
		return fmt.Errorf("%w: %w", ErrStorageIO, err)
	}
	return err
}

// Probe commits one small write (it rewrites the schema version row with
// its own value): the Gate's test that writes succeed again before it
// leaves storage_full. A nil error means a transaction reached the disk.
func (s *Store) Probe(ctx context.Context) error {
	return s.w.do(ctx, func(t *wtx) error {
		_, err := t.exec(`UPDATE schema_version SET version = version WHERE id = 1`)
		return err
	})
}

// ExtendLeases gives every attempt leased to a connected lane's live
// generation a deadline of at least now + its lease TTL, and returns how
// many it extended. The Gate calls it when writes work again after
// storage failures: heartbeats it could not record while the disk was
// full must not cost a running attempt its lease.
func (s *Store) ExtendLeases(ctx context.Context, now time.Time) (int, error) {
	us := now.UnixMicro()
	var n int64
	err := s.w.do(ctx, func(t *wtx) error {
		res, err := t.exec(`UPDATE attempts SET deadline_at = max(deadline_at, ? + lease_ttl_us)
WHERE status = 'leased' AND deadline_at < ? + lease_ttl_us
  AND EXISTS (SELECT 1 FROM lanes l WHERE l.lane = attempts.lane AND l.generation = attempts.generation AND l.connected = 1)`, us, us)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// RestoreInfo describes a restored database.
type RestoreInfo struct {
	Bytes         int64
	SchemaVersion int
	// Epoch is the new fencing epoch (the copy's plus one).
	Epoch int64
	// EventFloor: every job in the copy records its next event with a
	// sequence number above it.
	EventFloor int64
}

// Restore puts the standalone database file src (a forge backup, or a
// replica restored to a file) in place as the file database dsn names,
// opening a new fencing epoch. It refuses, changing nothing:
//   - a copy that fails CheckCopy (integrity_check, application id, a
//     schema newer than this build: ErrSchemaTooNew);
//   - a state directory that is missing, not a real directory, or has
//     group or world permission bits;
//   - a running Gate: the directory's flock (the one every Store holds) is
//     taken first, non-blocking, and held until the file is in place, so
//     ErrLocked means a Gate has the directory;
//   - a directory that already holds the database or any -wal, -shm or
//     -journal.
//
// The copy is written to a new file in the state directory, changed there
// (below), fsynced, given the directory's owner (the Gate's account, as
// the preflight requires) and mode 0600, renamed into place, and the
// directory fsynced.
//
// The new epoch (DECISIONS 20): nothing issued before the restore is used
// again after it. Attempt ids and connection generations are 128-bit
// random values the Gate never reissues; every lane is marked disconnected,
// so no generation bound in the copy is live (a result, heartbeat or
// evidence for an attempt leased before the loss is refused as stale, and
// the attempt expires at its deadline). Event sequence numbers are per job
// and would restart from the copy's: each job's last sequence number is
// raised to at least the event floor, the restore's time in microseconds
// (and above any time the copy records), so the next event is numbered
// above anything the lost database could have issued (that would take a
// job more than one event per microsecond since the previous epoch
// began). The epoch counter is SQLite's user_version header field.
func Restore(ctx context.Context, src, dsn string, now time.Time) (RestoreInfo, error) {
	loc, err := parseDSN(dsn)
	if err != nil {
		return RestoreInfo{}, err
	}
	if loc.memory {
		return RestoreInfo{}, refused("restore: not a file database")
	}
	if !fileStorageSupported {
		return RestoreInfo{}, ErrUnsupportedStorage
	}
	src, err = filepath.Abs(src)
	if err != nil {
		return RestoreInfo{}, refused("the copy's path cannot be resolved")
	}
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return RestoreInfo{}, refused("the copy does not exist")
	case err != nil:
		return RestoreInfo{}, refused("the copy cannot be inspected")
	case !fi.Mode().IsRegular():
		return RestoreInfo{}, refused("the copy is not a regular file")
	}
	if _, err := CheckCopy(ctx, src); err != nil {
		return RestoreInfo{}, err
	}
	dir := filepath.Dir(loc.path)
	lock, uid, gid, err := lockForRestore(dir)
	if err != nil {
		return RestoreInfo{}, err
	}
	defer lock.release()
	for _, suffix := range append([]string{""}, companions...) {
		if _, err := os.Lstat(loc.path + suffix); !errors.Is(err, fs.ErrNotExist) {
			return RestoreInfo{}, refused("the state directory already has a database or its -wal, -shm or -journal; move them away first")
		}
	}

	tmp := filepath.Join(dir, "."+filepath.Base(loc.path)+".restore-"+randomSuffix())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: the new database cannot be created: %s", fsReason(err))
	}
	keep := false
	defer func() {
		f.Close()
		if !keep {
			os.Remove(tmp)
		}
		for _, suffix := range companions {
			os.Remove(tmp + suffix)
		}
	}()
	n, err := copyInto(ctx, f, src)
	if err != nil {
		return RestoreInfo{}, err
	}
	info, err := openEpoch(ctx, tmp, now)
	if err != nil {
		return RestoreInfo{}, err
	}
	info.Bytes = n
	if _, err := CheckCopy(ctx, tmp); err != nil {
		return RestoreInfo{}, err
	}
	if err := f.Sync(); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: sync the new database: %s", fsReason(err))
	}
	if err := f.Chown(uid, gid); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: give the new database the state directory's owner: %s", fsReason(err))
	}
	if err := f.Chmod(0o600); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: set the new database's mode: %s", fsReason(err))
	}
	if err := os.Rename(tmp, loc.path); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: rename the new database into place: %s", fsReason(err))
	}
	keep = true
	if err := syncDir(dir); err != nil {
		return info, fmt.Errorf("store: restore: sync the state directory: %s", fsReason(err))
	}
	return info, nil
}

// copyInto copies the regular file src into f, checking ctx between
// chunks.
func copyInto(ctx context.Context, f *os.File, src string) (int64, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|oNoFollow|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, refused("the copy cannot be opened")
	}
	defer in.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("store: restore: interrupted: %w", err)
		}
		r, rerr := in.Read(buf)
		if r > 0 {
			if _, err := f.Write(buf[:r]); err != nil {
				return 0, fmt.Errorf("store: restore: write the new database: %s", fsReason(err))
			}
			n += int64(r)
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return 0, errors.New("store: restore: the copy cannot be read")
		}
	}
}

// openEpoch opens the fencing epoch in the database file at path (not yet
// in place, so no Gate has it) in one transaction, in rollback-journal
// mode (the Gate switches it back to WAL when it opens it).
func openEpoch(ctx context.Context, path string, now time.Time) (RestoreInfo, error) {
	db, err := sql.Open("sqlite", fileURI(path)+"?mode=rw&_txlock=immediate&_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)"+
		fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS))
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: open: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: begin: %s", sqliteReason(err))
	}
	defer tx.Rollback()
	var info RestoreInfo
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT version FROM schema_version WHERE id = 1),
  (SELECT user_version FROM pragma_user_version),
  max(coalesce((SELECT max(updated_at) FROM jobs), 0), coalesce((SELECT max(connected_at) FROM lanes), 0), coalesce((SELECT max(disconnected_at) FROM lanes), 0))`).
		Scan(&info.SchemaVersion, &info.Epoch, &newest); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: read the copy: %s", sqliteReason(err))
	}
	info.Epoch++
	us := now.UnixMicro()
	info.EventFloor = max(us, newest+1)
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET event_count = ? WHERE event_count < ?`, info.EventFloor, info.EventFloor); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: raise event numbers: %s", sqliteReason(err))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lanes SET connected = 0, disconnected_at = ? WHERE connected = 1`, max(us, newest)); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: fence lanes: %s", sqliteReason(err))
	}
	// PRAGMA takes no bound parameter; the value is an integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", info.Epoch)); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: record the epoch: %s", sqliteReason(err))
	}
	if err := tx.Commit(); err != nil {
		return RestoreInfo{}, fmt.Errorf("store: restore: commit: %s", sqliteReason(err))
	}
	return info, nil
}

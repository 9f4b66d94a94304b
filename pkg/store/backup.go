package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrBackupRefused matches every refusal of Backup and Restore that is the
// input's fault (a destination that is not a private regular file, a
// source that is not a sound Agent Forge database, a running Gate, ...).
// Its messages name a role ("backup destination", "state directory"),
// never a path.
var ErrBackupRefused = errors.New("store: refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBackupRefused}, args...)...)
}

// BackupInfo describes a finished copy.
type BackupInfo struct {
	Bytes         int64
	SchemaVersion int
	Epoch         int64
}

// Progress is told the bytes written so far and the size of the source
// (the database and its -wal), at most a few times a second.
type Progress func(written, total int64)

// Backup writes a consistent copy of the file database dsn names to dst
// while a Gate may be serving it. The copy is made by VACUUM INTO on a
// read-only connection (one read transaction: a snapshot of every commit
// before it began, none after), into a new 0600 file beside dst; that file
// is fsynced, reopened read-only and checked (integrity_check, the Agent
// Forge application id, this build's schema version), renamed over dst
// and the directory fsynced. On any failure the temporary file is removed
// and dst is unchanged. Nothing is written beside the database: a reader
// only uses the -wal and -shm a running Gate keeps, and a stopped Gate's
// cleanly closed database is read as immutable. ctx bounds the whole copy.
func Backup(ctx context.Context, dsn, dst string, progress Progress) (BackupInfo, error) {
	loc, err := parseDSN(dsn)
	if err != nil {
		return BackupInfo{}, err
	}
	if loc.memory {
		return BackupInfo{}, refused("backup: not a file database")
	}
	if !fileStorageSupported {
		return BackupInfo{}, ErrUnsupportedStorage
	}
	dst, err = filepath.Abs(dst)
	if err != nil {
		return BackupInfo{}, refused("backup destination cannot be resolved")
	}
	if dst == loc.path || strings.HasPrefix(filepath.Base(dst), filepath.Base(loc.path)+"-") && filepath.Dir(dst) == filepath.Dir(loc.path) {
		return BackupInfo{}, refused("backup destination is the database or one of its companions")
	}
	if err := checkDestination(dst); err != nil {
		return BackupInfo{}, err
	}
	params, err := readerParams(loc.path)
	if err != nil {
		return BackupInfo{}, err
	}
	total := fileSize(loc.path) + fileSize(loc.path+"-wal")

	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-"+randomSuffix())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("store: backup: the temporary copy cannot be created: %s", fsReason(err))
	}
	keep := false
	defer func() {
		f.Close()
		if !keep {
			os.Remove(tmp)
		}
	}()

	db, err := sql.Open("sqlite", fileURI(loc.path)+params+fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS))
	if err != nil {
		return BackupInfo{}, fmt.Errorf("store: backup: open: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := identifyForCopy(ctx, db); err != nil {
		return BackupInfo{}, err
	}
	stop := watchProgress(f, total, progress)
	_, err = db.ExecContext(ctx, "VACUUM INTO ?", tmp)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return BackupInfo{}, fmt.Errorf("store: backup: interrupted: %w", ctx.Err())
		}
		return BackupInfo{}, fmt.Errorf("store: backup: copy failed: %s", sqliteReason(err))
	}
	db.Close()
	// SQLite does not sync a VACUUM INTO target.
	if err := f.Sync(); err != nil {
		return BackupInfo{}, fmt.Errorf("store: backup: sync the copy: %s", fsReason(err))
	}
	fi, err := f.Stat()
	if err != nil {
		return BackupInfo{}, errors.New("store: backup: the copy cannot be inspected")
	}
	info, err := CheckCopy(ctx, tmp)
	if err != nil {
		return BackupInfo{}, err
	}
	if info.SchemaVersion != SchemaVersion {
		return BackupInfo{}, refused("backup: the database's schema version is not this build's")
	}
	info.Bytes = fi.Size()
	if err := os.Rename(tmp, dst); err != nil {
		return BackupInfo{}, fmt.Errorf("store: backup: rename the copy into place: %s", fsReason(err))
	}
	keep = true
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return info, fmt.Errorf("store: backup: sync the destination directory: %s", fsReason(err))
	}
	if progress != nil {
		progress(info.Bytes, total)
	}
	return info, nil
}

// readerParams returns the URI parameters of a read-only connection to the
// database at path that creates nothing beside it: with a -wal and -shm (a
// running Gate, or one that stopped uncleanly) a plain read-only
// connection shares them; with neither, the database is fully
// checkpointed and is read as immutable. A lone -wal or -shm is refused,
// since SQLite would create the other.
func readerParams(path string) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", refused("the database does not exist")
	case err != nil:
		return "", refused("the database cannot be inspected")
	case !fi.Mode().IsRegular():
		return "", refused("the database is not a regular file")
	}
	if err := readIdentity(path); err != nil {
		return "", err
	}
	switch wal, shm := exists(path+"-wal"), exists(path+"-shm"); {
	case !wal && !shm:
		return "?mode=ro&immutable=1", nil
	case wal != shm:
		return "", refused("the database has a -wal or -shm file without its companion (an unclean stop); start the Gate once to recover it")
	}
	return "?mode=ro", nil
}

// identifyForCopy refuses, before anything is copied, a database without
// the Agent Forge application id (readIdentity saw the main file's header;
// this reads through the WAL).
func identifyForCopy(ctx context.Context, db *sql.DB) error {
	var appID int64
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return fmt.Errorf("store: backup: read the database: %s", sqliteReason(err))
	}
	if appID != ApplicationID {
		return foreign("SQLite application id does not match")
	}
	return nil
}

// CheckCopy checks a standalone database file (a backup, or a file about
// to be restored) without changing it: opened read-only and immutable, it
// must pass integrity_check and carry the Agent Forge application id and a
// schema version this build knows. It reports the schema version and the
// fencing epoch.
func CheckCopy(ctx context.Context, path string) (BackupInfo, error) {
	if exists(path+"-wal") || exists(path+"-shm") || exists(path+"-journal") {
		return BackupInfo{}, refused("the copy has -wal, -shm or -journal files beside it")
	}
	if err := readIdentity(path); err != nil {
		return BackupInfo{}, err
	}
	db, err := sql.Open("sqlite", fileURI(path)+"?mode=ro&immutable=1&_pragma=query_only(1)")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("store: check copy: open: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var verdict string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check(1)").Scan(&verdict); err != nil {
		if ctx.Err() != nil {
			return BackupInfo{}, fmt.Errorf("store: check copy: interrupted: %w", ctx.Err())
		}
		return BackupInfo{}, refused("the copy is not a sound SQLite database")
	}
	if verdict != "ok" {
		return BackupInfo{}, refused("the copy fails SQLite's integrity check")
	}
	var appID, epoch int64
	if err := db.QueryRowContext(ctx, "SELECT application_id, user_version FROM pragma_application_id, pragma_user_version").Scan(&appID, &epoch); err != nil {
		return BackupInfo{}, refused("the copy's header cannot be read")
	}
	if appID != ApplicationID {
		return BackupInfo{}, foreign("SQLite application id does not match")
	}
	var version int
	err = db.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&version)
	switch {
	case err != nil:
		return BackupInfo{}, refused("the copy has no schema version")
	case version > SchemaVersion:
		return BackupInfo{}, ErrSchemaTooNew
	}
	return BackupInfo{SchemaVersion: version, Epoch: epoch}, nil
}

// checkDestination accepts a backup destination whose directory is a real
// directory owned by root or the effective user and not writable by
// anyone else (sticky directories excepted), and which is missing or a
// regular file (replaced atomically).
func checkDestination(dst string) error {
	dir := filepath.Dir(dst)
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return refused("backup destination directory does not exist")
	}
	if err := checkAncestor(dir, uint32(os.Geteuid())); err != nil {
		return refused("backup destination directory %s", strings.TrimPrefix(err.Error(), "store: insecure database location: ancestor directory "))
	}
	fi, err = os.Lstat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return refused("backup destination cannot be inspected")
	case !fi.Mode().IsRegular():
		return refused("backup destination exists and is not a regular file")
	}
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// watchProgress reports the size of f every 200ms until stop is called.
func watchProgress(f *os.File, total int64, progress Progress) (stop func()) {
	if progress == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if fi, err := f.Stat(); err == nil {
					progress(fi.Size(), total)
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// fsReason names, without a path, why a file operation failed.
func fsReason(err error) string {
	if r := createFailure(err); r != "" {
		return r
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "input/output error"
}

// sqliteReason is SQLite's message for err without anything the caller
// passed in (the driver's messages name no path for these statements).
func sqliteReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "SQLITE_FULL"), strings.Contains(msg, "disk is full"):
		return "no space left on the file system"
	case strings.Contains(msg, "SQLITE_BUSY"), strings.Contains(msg, "locked"):
		return "the database stayed locked"
	case strings.Contains(msg, "SQLITE_CORRUPT"), strings.Contains(msg, "malformed"):
		return "the database is corrupt"
	case strings.Contains(msg, "SQLITE_CANTOPEN"), strings.Contains(msg, "unable to open"):
		return "a file cannot be opened"
	}
	return "SQLite error"
}

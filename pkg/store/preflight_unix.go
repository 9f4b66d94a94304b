//go:build unix

package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// InsecureError says which preflight rule a database location broke. Object
// is a fixed role name ("database", "database parent directory", "-wal
// file", "ancestor directory"), never a path.
type InsecureError struct {
	Object string
	Reason string
}

func (e *InsecureError) Error() string {
	return "store: insecure database location: " + e.Object + " " + e.Reason
}

// Is makes errors.Is(err, ErrInsecure) true for every InsecureError.
func (e *InsecureError) Is(target error) bool { return target == ErrInsecure }

func insecure(object, reason string) error { return &InsecureError{Object: object, Reason: reason} }

// fileLock is the exclusive flock on the database's parent directory that
// keeps a second Store (in this or another process) away from the database.
type fileLock struct{ dir *os.File }

func (l *fileLock) release() {
	if l != nil && l.dir != nil {
		l.dir.Close()
	}
}

func statOwner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

const groupWorldWrite = 0o022

// checkAncestor applies the trusted-ancestor rule to one directory above the
// immediate parent: a real directory (not a symlink) owned by root or the
// effective UID, and not group- or world-writable unless the sticky bit is
// set (as on /tmp, where other users can add entries but cannot remove or
// rename ours).
func checkAncestor(path string, euid uint32) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return insecure("ancestor directory", "cannot be inspected")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return insecure("ancestor directory", "is a symlink")
	}
	if !fi.IsDir() {
		return insecure("ancestor directory", "is not a directory")
	}
	uid, ok := statOwner(fi)
	if !ok || (uid != 0 && uid != euid) {
		return insecure("ancestor directory", "is not owned by root or the effective user")
	}
	if fi.Mode().Perm()&groupWorldWrite != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return insecure("ancestor directory", "is group- or world-writable without the sticky bit")
	}
	return nil
}

// checkParent applies the immediate-parent rule: a real directory owned by
// the effective UID with no group or world permission bits.
func checkParent(fi fs.FileInfo, euid uint32) error {
	const obj = "database parent directory"
	if fi.Mode()&fs.ModeSymlink != 0 {
		return insecure(obj, "is a symlink")
	}
	if !fi.IsDir() {
		return insecure(obj, "is not a directory")
	}
	if uid, ok := statOwner(fi); !ok || uid != euid {
		return insecure(obj, "is not owned by the effective user")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return insecure(obj, "has group or world permission bits")
	}
	return nil
}

// checkFile applies the database-file rule to the database or one of its
// -journal, -wal and -shm companions: a regular file (not a symlink) owned
// by the effective UID with mode exactly 0600.
func checkFile(object string, fi fs.FileInfo, euid uint32) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return insecure(object, "is a symlink")
	}
	if !fi.Mode().IsRegular() {
		return insecure(object, "is not a regular file")
	}
	if uid, ok := statOwner(fi); !ok || uid != euid {
		return insecure(object, "is not owned by the effective user")
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0o600 {
		return insecure(object, "does not have mode 0600")
	}
	return nil
}

var companions = []string{"-journal", "-wal", "-shm"}

// checkCompanions verifies every existing -journal, -wal and -shm file.
// With dbMissing, any existing companion is refused: it cannot belong to a
// database that is about to be created, and SQLite would silently delete or
// reuse it.
func checkCompanions(dbPath string, euid uint32, dbMissing bool) error {
	for _, suffix := range companions {
		fi, err := os.Lstat(dbPath + suffix)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return insecure(suffix+" file", "cannot be inspected")
		}
		if err := checkFile(suffix+" file", fi, euid); err != nil {
			return err
		}
		if dbMissing {
			return insecure(suffix+" file", "exists while the database is missing")
		}
	}
	return nil
}

// readHeader checks the existing database file fi (already verified by
// checkFile) with checkHeader before SQLite opens it, so a foreign file is
// refused without SQLite rolling back a journal or creating a WAL beside
// it. The descriptor is closed before SQLite opens the file.
func readHeader(dbPath string, fi fs.FileInfo) error {
	f, err := os.OpenFile(dbPath, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return insecure("database", "cannot be opened for reading")
	}
	defer f.Close()
	ffi, err := f.Stat()
	if err != nil || !os.SameFile(fi, ffi) {
		return insecure("database", "changed during the check")
	}
	hdr := make([]byte, sqliteHeaderBytes)
	n, err := io.ReadFull(f, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return errors.New("store: open: database header cannot be read")
	}
	return checkHeader(hdr[:n], ffi.Size())
}

// preflight enforces the file-permission rules for a file database at the
// absolute, cleaned path dbPath and returns the lock that must be held until
// after SQLite has closed the database. It never chmods, removes or replaces
// an existing object; it creates at most the immediate parent (0700) and the
// database file itself (0600, O_EXCL).
//
// Order: every ancestor above the parent is checked from the root down; the
// parent is checked or (if only it is missing) created; the parent is opened
// and flocked (LOCK_EX|LOCK_NB) so a second Store fails with ErrLocked
// before touching any file; the parent must be writable (checkWritable).
// For an existing database the file, then the companions, then its header
// (checkHeader) are checked; for a missing one the companions are checked
// first (any existing one is refused) and only then is the database
// pre-created, so every refusal leaves the directory unchanged.
func preflight(dbPath string) (*fileLock, error) {
	euid := uint32(os.Geteuid())
	parent := filepath.Dir(dbPath)
	if parent == dbPath || parent == "/" {
		return nil, insecure("database parent directory", "is the filesystem root")
	}
	var ancestors []string
	for d := filepath.Dir(parent); ; d = filepath.Dir(d) {
		ancestors = append(ancestors, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(ancestors) - 1; i >= 0; i-- {
		if err := checkAncestor(ancestors[i], euid); err != nil {
			return nil, err
		}
	}

	fi, err := os.Lstat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(parent, 0o700); err != nil {
			if reason := createFailure(err); reason != "" {
				return nil, errors.New("store: database parent directory could not be created: " + reason)
			}
			return nil, insecure("database parent directory", "could not be created")
		}
		fi, err = os.Lstat(parent)
		if err != nil {
			return nil, insecure("database parent directory", "cannot be inspected after creation")
		}
		if fi.Mode().Perm() != 0o700 {
			return nil, insecure("database parent directory", "was created without mode 0700 (check the umask)")
		}
	case err != nil:
		return nil, insecure("database parent directory", "cannot be inspected")
	}
	if err := checkParent(fi, euid); err != nil {
		return nil, err
	}

	dir, err := os.OpenFile(parent, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, insecure("database parent directory", "cannot be opened")
	}
	lock := &fileLock{dir: dir}
	ok := false
	defer func() {
		if !ok {
			lock.release()
		}
	}()
	dfi, err := dir.Stat()
	if err != nil || !os.SameFile(fi, dfi) {
		return nil, insecure("database parent directory", "changed during the check")
	}
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("store: lock database directory: %w", err)
	}

	if err := checkWritable(parent, fi, euid); err != nil {
		return nil, err
	}

	fi, err = os.Lstat(dbPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Companions first: a refused start must leave nothing behind.
		if err := checkCompanions(dbPath, euid, true); err != nil {
			return nil, err
		}
		if err := createDatabase(dbPath, euid); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, insecure("database", "cannot be inspected")
	default:
		if err := checkFile("database", fi, euid); err != nil {
			return nil, err
		}
		if err := checkCompanions(dbPath, euid, false); err != nil {
			return nil, err
		}
		if err := readHeader(dbPath, fi); err != nil {
			return nil, err
		}
	}
	ok = true
	return lock, nil
}

// createDatabase atomically creates the missing database file with
// O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, then verifies the new file
// through its descriptor. The descriptor is closed before SQLite opens the
// file, so it never holds (or drops) SQLite's POSIX locks.
func createDatabase(dbPath string, euid uint32) error {
	f, err := os.OpenFile(dbPath, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if reason := createFailure(err); reason != "" {
			return errors.New("store: database could not be created: " + reason)
		}
		return insecure("database", "could not be created exclusively")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return insecure("database", "cannot be inspected after creation")
	}
	if err := checkFile("database", fi, euid); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: sync new database file: %w", errors.Unwrap(err))
	}
	return nil
}

// createFailure names, without any path, an environmental reason a file or
// directory could not be created (read-only file system, no write
// permission, no space); "" for anything else, which the caller reports as
// a refusal of the location.
func createFailure(err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return "read-only file system"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "the containing directory is not writable (permission denied)"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "no space left on the file system"
	}
	return ""
}

// checkWritable names the cause when startup's writes (the database, its
// -wal and -shm) cannot happen in the parent directory pi: a read-only file
// system (access(2) reports EROFS whatever the UID) or, for a non-root
// owner, a directory without write and search permission. Otherwise SQLite
// would fail later with an unspecific "unable to open database file".
func checkWritable(parent string, pi fs.FileInfo, euid uint32) error {
	const wOK = 2
	if err := syscall.Access(parent, wOK); errors.Is(err, syscall.EROFS) {
		return errors.New("store: database location is not writable: read-only file system")
	}
	if euid != 0 && pi.Mode().Perm()&0o300 != 0o300 {
		return errors.New("store: database location is not writable: the containing directory is not writable (permission denied)")
	}
	return nil
}

// postOpenCheck re-verifies the database and companions after SQLite opened
// them (SQLite creates -wal and -shm with the database file's mode).
func postOpenCheck(dbPath string) error {
	euid := uint32(os.Geteuid())
	fi, err := os.Lstat(dbPath)
	if err != nil {
		return insecure("database", "cannot be inspected")
	}
	if err := checkFile("database", fi, euid); err != nil {
		return err
	}
	return checkCompanions(dbPath, euid, false)
}

const fileStorageSupported = true

// lockForRestore opens the existing state directory dir, requires it to be
// a real directory without group or world permission bits, and takes the
// same flock a Store holds, so it fails with ErrLocked while a Gate runs on
// it and no Gate can start until the lock is released. It returns the
// directory's owner, which a Gate running there must be.
func lockForRestore(dir string) (_ *fileLock, uid, gid int, err error) {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, 0, refused("the state directory does not exist")
	case err != nil:
		return nil, 0, 0, refused("the state directory cannot be inspected")
	case fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir():
		return nil, 0, 0, refused("the state directory is not a directory")
	case fi.Mode().Perm()&0o077 != 0:
		return nil, 0, 0, refused("the state directory has group or world permission bits")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, 0, 0, refused("the state directory's owner cannot be read")
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, 0, refused("the state directory cannot be opened")
	}
	if dfi, err := d.Stat(); err != nil || !os.SameFile(fi, dfi) {
		d.Close()
		return nil, 0, 0, refused("the state directory changed during the check")
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, 0, 0, ErrLocked
		}
		return nil, 0, 0, fmt.Errorf("store: lock the state directory: %w", err)
	}
	return &fileLock{dir: d}, int(st.Uid), int(st.Gid), nil
}

// oNoFollow is O_NOFOLLOW where the platform has it.
const oNoFollow = syscall.O_NOFOLLOW

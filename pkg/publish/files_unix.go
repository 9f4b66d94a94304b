//go:build unix

package publish

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

const groupWorldWrite = 0o022

var errUnsafe = errors.New("unsafe file")

func owner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// ownedBy reports whether fi belongs to the effective UID.
func ownedBy(fi fs.FileInfo) bool {
	uid, ok := owner(fi)
	return ok && uid == uint32(os.Geteuid())
}

// checkDir: a real directory (not a symlink) owned by the effective UID
// and not group/world writable.
func checkDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 || !ownedBy(fi) || fi.Mode().Perm()&groupWorldWrite != 0 {
		return errUnsafe
	}
	return nil
}

// readPrivateFile reads at most limit bytes of path, which must be an
// owned regular file of mode exactly 0600 (opened without following a
// symlink and checked on the open descriptor) in an owned directory that
// is not group/world writable.
func readPrivateFile(path string, limit int64) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errUnsafe
	}
	if err := checkDir(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fs.ErrNotExist
		}
		return nil, errUnsafe
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !ownedBy(fi) || fi.Mode().Perm() != 0o600 {
		return nil, errUnsafe
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fs.ErrNotExist
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

var errTooLarge = errors.New("file too large")

// checkExecutable: path is canonical and absolute, an owned executable
// regular file that is not group/world writable, in a directory that is
// not group/world writable.
func checkExecutable(path string) error {
	if !canonical(path) {
		return errUnsafe
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || !ownedBy(fi) || fi.Mode().Perm()&0o100 == 0 || fi.Mode().Perm()&groupWorldWrite != 0 {
		return errUnsafe
	}
	di, err := os.Lstat(filepath.Dir(path))
	if err != nil || !di.IsDir() || di.Mode().Perm()&groupWorldWrite != 0 {
		return errUnsafe
	}
	return nil
}

// checkWorktree: path is canonical and absolute, an owned directory that
// is not group/world writable, holding a real .git directory.
func checkWorktree(path string) error {
	if !canonical(path) {
		return errUnsafe
	}
	if err := checkDir(path); err != nil {
		return err
	}
	fi, err := os.Lstat(filepath.Join(path, ".git"))
	if err != nil || !fi.IsDir() || !ownedBy(fi) {
		return errUnsafe
	}
	return nil
}

// canonical reports whether path is absolute, clean and free of symlinks.
func canonical(path string) bool {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return false
	}
	real, err := filepath.EvalSymlinks(path)
	return err == nil && real == path
}

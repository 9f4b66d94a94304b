//go:build !linux

package worker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Without openat in the syscall package, names are resolved by path,
// each component checked with lstat first and the opened file compared
// with it: no symbolic link is followed knowingly, but a swap between the
// two is not excluded. Such Workers run without a sandbox (DECISIONS 14),
// so the agent is unconfined there anyway.

// errSymlink: a component is a symbolic link (never followed).
const errSymlink = attemptFileError("symbolic link")

// errNotDirectory: a component before the last is not a directory.
const errNotDirectory = attemptFileError("not a directory")

func openDirNoFollow(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, errSymlink
	}
	if !fi.IsDir() {
		return nil, errNotDirectory
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if now, err := f.Stat(); err != nil || !os.SameFile(fi, now) {
		f.Close()
		return nil, errors.New("directory changed while opened")
	}
	return f, nil
}

func openDirAt(dir *os.File, name string) (*os.File, error) {
	return openDirNoFollow(filepath.Join(dir.Name(), name))
}

func openBeneath(dir *os.File, name string) (*os.File, fs.FileInfo, error) {
	parts, ok := splitRel(name)
	if !ok {
		return nil, nil, fs.ErrInvalid
	}
	p := dir.Name()
	for _, c := range parts[:len(parts)-1] {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, nil, err
		}
		if !fi.IsDir() {
			return nil, nil, errNotDirectory
		}
	}
	p = filepath.Join(p, parts[len(parts)-1])
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, errSymlink
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func readlinkBeneath(dir *os.File, name string) (string, error) {
	if _, ok := splitRel(name); !ok {
		return "", fs.ErrInvalid
	}
	t, err := os.Readlink(filepath.Join(dir.Name(), filepath.FromSlash(name)))
	if err == nil && len(t) > maxLinkTarget {
		return "", errTooLarge
	}
	return t, err
}

func readlinkAt(dir *os.File, name string) (string, error) { return readlinkBeneath(dir, name) }

func mkdirAt(dir *os.File, name string, perm uint32) (*os.File, error) {
	if err := os.Mkdir(filepath.Join(dir.Name(), name), os.FileMode(perm)); err != nil {
		return nil, err
	}
	return openDirAt(dir, name)
}

func linkAt(src *os.File, dst *os.File, name string) error {
	return os.Link(filepath.Join(src.Name(), name), filepath.Join(dst.Name(), name))
}

func statAt(dir *os.File, name string) (size, ctime int64, err error) {
	fi, err := os.Lstat(filepath.Join(dir.Name(), name))
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), ctimeOf(fi), nil
}

// ctimeOf is fi's change time (ns), or 0 where the system does not say
// (every file then counts as changed: correct, and slower).
func ctimeOf(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctimespec.Nano()
	}
	return 0
}

func ctimeNow(dir string) (int64, error) {
	p := filepath.Join(dir, ".forge-ctime")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	f.Close()
	if rerr := os.Remove(p); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	return ctimeOf(fi), nil
}

func createAt(dir *os.File, name string, perm uint32) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir.Name(), name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, os.FileMode(perm))
}

func symlinkAt(target string, dir *os.File, name string) error {
	return os.Symlink(target, filepath.Join(dir.Name(), name))
}

package worker

import (
	"io/fs"
	"os"
	"syscall"
	"unsafe"
)

// errSymlink: a component is a symbolic link (never followed).
const errSymlink = attemptFileError("symbolic link")

// errNotDirectory: a component before the last is not a directory.
const errNotDirectory = attemptFileError("not a directory")

// atFDCWD is AT_FDCWD: a path relative to the working directory.
const atFDCWD = -100

// oPath is O_PATH (0x200000 on the architectures the Worker is built
// for; the syscall package does not name it).
const oPath = 0x200000

// openDirNoFollow opens the directory at path; its last component is
// not followed (the ones before it are the Worker's own).
func openDirNoFollow(path string) (*os.File, error) {
	fd, err := openNoEINTR(atFDCWD, path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return nil, dirErr(atFDCWD, path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// dirErr maps a failed directory open: with O_DIRECTORY a symbolic link
// fails ENOTDIR, told apart here by an lstat.
func dirErr(dirfd int, name string, err error) error {
	if err == syscall.ENOTDIR {
		if _, e := readlinkFD(dirfd, name); e == nil || e == errTooLarge {
			return errSymlink
		}
	}
	return openErr(err)
}

// openDirAt opens the directory name (one component) beneath dir without
// following a symbolic link.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	fd, err := openNoEINTR(int(dir.Fd()), name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return nil, dirErr(int(dir.Fd()), name, err)
	}
	return os.NewFile(uintptr(fd), dir.Name()+"/"+name), nil
}

// openBeneath opens name (relative, slash-separated) beneath dir, every
// component without following a symbolic link, the last one read-only and
// non-blocking (a FIFO never blocks), and returns it with its fstat.
func openBeneath(dir *os.File, name string) (*os.File, fs.FileInfo, error) {
	parts, ok := splitRel(name)
	if !ok {
		return nil, nil, fs.ErrInvalid
	}
	cur := dir
	for _, p := range parts[:len(parts)-1] {
		next, err := openDirAt(cur, p)
		if cur != dir {
			cur.Close()
		}
		if err == errSymlink {
			err = errNotDirectory
		}
		if err != nil {
			return nil, nil, err
		}
		cur = next
	}
	last := parts[len(parts)-1]
	fd, err := openNoEINTR(int(cur.Fd()), last, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC)
	if cur != dir {
		cur.Close()
	}
	if err != nil {
		return nil, nil, openErr(err)
	}
	f := os.NewFile(uintptr(fd), dir.Name()+"/"+name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readlinkBeneath reads the target of the symbolic link name beneath dir
// (at most maxLinkTarget bytes).
func readlinkBeneath(dir *os.File, name string) (string, error) {
	parts, ok := splitRel(name)
	if !ok {
		return "", fs.ErrInvalid
	}
	cur := dir
	for _, p := range parts[:len(parts)-1] {
		next, err := openDirAt(cur, p)
		if cur != dir {
			cur.Close()
		}
		if err != nil {
			return "", err
		}
		cur = next
	}
	if cur != dir {
		defer cur.Close()
	}
	return readlinkAt(cur, parts[len(parts)-1])
}

// readlinkAt reads the target of the symbolic link name (one component)
// in dir.
func readlinkAt(dir *os.File, name string) (string, error) { return readlinkFD(int(dir.Fd()), name) }

func readlinkFD(dirfd int, name string) (string, error) {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return "", err
	}
	buf := make([]byte, maxLinkTarget+1)
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EINVAL:
			return "", errNotRegular // not a symbolic link (any more)
		case e != 0:
			return "", openErr(e)
		case int(n) > maxLinkTarget:
			return "", errTooLarge
		}
		return string(buf[:n]), nil
	}
}

func openNoEINTR(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// openErr maps an open's errno: a symbolic link met with O_NOFOLLOW is
// errSymlink, a non-directory errNotDirectory, absence fs.ErrNotExist.
func openErr(err error) error {
	switch err {
	case syscall.ELOOP:
		return errSymlink
	case syscall.ENOTDIR:
		return errNotDirectory
	case syscall.ENOENT:
		return fs.ErrNotExist
	}
	return err
}

// mkdirAt makes the directory name in dir (mode perm) and opens it.
func mkdirAt(dir *os.File, name string, perm uint32) (*os.File, error) {
	if err := syscall.Mkdirat(int(dir.Fd()), name, perm); err != nil {
		return nil, err
	}
	return openDirAt(dir, name)
}

// linkAt makes name in dst a hard link to name in src: the inode itself,
// a symbolic link as a link (never followed).
func linkAt(src *os.File, dst *os.File, name string) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_LINKAT, src.Fd(), uintptr(unsafe.Pointer(p)), dst.Fd(), uintptr(unsafe.Pointer(p)), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// statAt is the size and change time (ns) of name in dir, not followed
// (an O_PATH descriptor beneath dir, fstat).
func statAt(dir *os.File, name string) (size, ctime int64, err error) {
	fd, err := openNoEINTR(int(dir.Fd()), name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return 0, 0, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, 0, err
	}
	return st.Size, st.Ctim.Nano(), nil
}

// ctimeNow is the change time a file changed now in dir gets: that of a
// probe file made there (exclusively, not followed) and removed.
func ctimeNow(dir string) (int64, error) {
	d, err := openDirNoFollow(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	const probe = ".forge-ctime"
	f, err := createAt(d, probe, 0o600)
	if err != nil {
		return 0, err
	}
	var st syscall.Stat_t
	err = syscall.Fstat(int(f.Fd()), &st)
	f.Close()
	if uerr := syscall.Unlinkat(int(d.Fd()), probe); err == nil {
		err = uerr
	}
	return st.Ctim.Nano(), err
}

// createAt creates the regular file name in dir, exclusively.
func createAt(dir *os.File, name string, perm uint32) (*os.File, error) {
	fd, err := openNoEINTR(int(dir.Fd()), name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), dir.Name()+"/"+name)
	if err := f.Chmod(os.FileMode(perm)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// symlinkAt makes name in dir a symbolic link to target.
func symlinkAt(target string, dir *os.File, name string) error {
	t, err := syscall.BytePtrFromString(target)
	if err != nil {
		return err
	}
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := syscall.Syscall(syscall.SYS_SYMLINKAT, uintptr(unsafe.Pointer(t)), dir.Fd(), uintptr(unsafe.Pointer(p)))
	if e != 0 {
		return e
	}
	return nil
}

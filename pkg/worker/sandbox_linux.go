package worker

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unsafe"
)

// statDir returns the state of directory d (see dirState): one stat,
// nothing allocated.
func statDir(d string) dirState {
	var st syscall.Stat_t
	if syscall.Stat(d, &st) != nil {
		return dirState{}
	}
	return dirState{dev: st.Dev, ino: st.Ino, mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec}
}

// dirWatch tells with one system call whether directories changed since
// they were added: an inotify instance watching each directory and each
// of its ancestors, and the mount table. For a directory every entry
// created, deleted or renamed counts, and the directory itself deleted or
// renamed; for an ancestor only the entry on the way down to one of the
// directories (whatever else changes there leaves their paths alone). A
// mount anywhere counts: one over a directory changes what its path names
// and no inotify event says so. Attribute changes (IN_ATTRIB, IN_MODIFY)
// do not count: they leave a path naming the same file. A lost event (the
// queue overflowed), a watch gone (IN_IGNORED, IN_UNMOUNT) or an error
// counts as a change.
type dirWatch struct {
	fd, mounts int // the inotify instance and /proc/self/mountinfo; -1: closed
	// names are, by watch, the entries that matter; nil: all of them.
	names map[int32][]string
}

const (
	watchMask    = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_ONLYDIR
	watchLost    = syscall.IN_Q_OVERFLOW | syscall.IN_IGNORED | syscall.IN_UNMOUNT | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF
	pollIn       = 0x1
	pollPri      = 0x2
	eventMinSize = syscall.SizeofInotifyEvent
)

func newDirWatch() *dirWatch { return &dirWatch{fd: -1, mounts: -1} }

// open starts again with nothing watched.
func (w *dirWatch) open() error {
	w.close()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return err
	}
	m, err := syscall.Open("/proc/self/mountinfo", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(fd)
		return err
	}
	w.fd, w.mounts, w.names = fd, m, map[int32][]string{}
	return nil
}

// add watches the directories dirs, each after its ancestors, so that one
// missing (or not a directory) is watched through its parent's entry.
func (w *dirWatch) add(dirs ...string) error {
	for _, d := range dirs {
		parts := strings.Split(strings.TrimPrefix(d, "/"), "/")
		for i := range len(parts) + 1 {
			p := "/" + filepath.Join(parts[:i]...)
			if d == "/" && i > 0 {
				break
			}
			wd, err := syscall.InotifyAddWatch(w.fd, p, watchMask)
			if err == syscall.ENOENT || err == syscall.ENOTDIR {
				break
			}
			if err != nil {
				return err
			}
			names, seen := w.names[int32(wd)]
			switch {
			case p == d:
				w.names[int32(wd)] = nil
			case !seen || names != nil:
				w.names[int32(wd)] = append(names, parts[i])
			}
		}
	}
	return nil
}

// armed reports whether w watches (open and add succeeded).
func (w *dirWatch) armed() bool { return w.fd >= 0 }

// changed reports whether anything w watches changed, draining what did
// not count; nothing pending costs one ppoll.
func (w *dirWatch) changed() bool {
	fds := [2]struct {
		fd             int32
		events, revent int16
	}{{fd: int32(w.fd), events: pollIn}, {fd: int32(w.mounts), events: pollPri}}
	var zero syscall.Timespec
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 2, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	switch {
	case e != 0 || fds[1].revent != 0 || fds[0].revent&^pollIn != 0:
		return true
	case n == 0:
		return false
	}
	var buf [4096]byte
	for {
		n, err := syscall.Read(w.fd, buf[:])
		if err == syscall.EAGAIN {
			return false
		}
		if err != nil || n < eventMinSize || w.counts(buf[:n]) {
			return true
		}
	}
}

// counts reports whether one of the events in b counts as a change.
func (w *dirWatch) counts(b []byte) bool {
	for len(b) > 0 {
		if len(b) < eventMinSize {
			return true
		}
		wd, mask, size := int32(binary.NativeEndian.Uint32(b)), binary.NativeEndian.Uint32(b[4:]), binary.NativeEndian.Uint32(b[12:])
		if uint64(size) > uint64(len(b)-eventMinSize) {
			return true
		}
		name := strings.TrimRight(string(b[eventMinSize:eventMinSize+int(size)]), "\x00")
		b = b[eventMinSize+int(size):]
		names, ok := w.names[wd]
		if mask&watchLost != 0 || !ok || names == nil || slices.Contains(names, name) {
			return true
		}
	}
	return false
}

// close closes w's descriptors; it watches nothing after.
func (w *dirWatch) close() {
	for _, fd := range []*int{&w.fd, &w.mounts} {
		if *fd >= 0 {
			syscall.Close(*fd)
			*fd = -1
		}
	}
}

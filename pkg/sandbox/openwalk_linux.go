//go:build linux && (amd64 || arm64)

package sandbox

import (
	"strings"
	"syscall"
	"unsafe"
)

// maxLinks is the kernel's bound on the symbolic links one lookup follows.
const maxLinks = 40

// walkOpen does in user space what openat2 does for the O_PATH opens of
// this package, for a process where the kernel call answers ENOSYS:
// systemd's RestrictSUIDSGID= (set by the installed Worker unit) refuses
// openat2 that way, because its filter cannot read the mode inside
// open_how. It opens one component at a time with O_NOFOLLOW, from the
// descriptor of the one before; a symbolic link it meets is read from
// the link's own descriptor and its target spliced in (at most maxLinks),
// so a magic link's text is only ever a path, never a jump. Under
// resolveBeneath it keeps its own stack of directories: an absolute name
// or link, or ".." above dirfd, fails EXDEV, as in the kernel; under
// resolveNoSymlinks any link met fails ELOOP. flags must hold O_PATH.
func walkOpen(dirfd int, path string, flags, resolve uint64) (int, syscall.Errno) {
	if flags&oPath == 0 {
		return -1, syscall.EINVAL
	}
	if path == "" {
		return -1, syscall.ENOENT
	}
	beneath := resolve&resolveBeneath != 0
	// A name ending in "/" names a directory, through a final link too.
	dirOnly := strings.HasSuffix(path, "/")
	followLast := flags&syscall.O_NOFOLLOW == 0 || dirOnly
	var stack []int
	release := func() {
		for _, fd := range stack {
			syscall.Close(fd)
		}
	}
	reset := func(from int, name string) syscall.Errno {
		release()
		stack = stack[:0]
		fd, err := syscall.Openat(from, name, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return errnoOf(err)
		}
		stack = append(stack, fd)
		return 0
	}
	start := "."
	if strings.HasPrefix(path, "/") {
		if beneath {
			return -1, syscall.EXDEV
		}
		start = "/"
	}
	if e := reset(dirfd, start); e != 0 {
		return -1, e
	}
	comps := components(path)
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		top := stack[len(stack)-1]
		if c == ".." && beneath {
			if len(stack) == 1 {
				release()
				return -1, syscall.EXDEV
			}
			syscall.Close(top)
			stack = stack[:len(stack)-1]
			continue
		}
		fd, err := syscall.Openat(top, c, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			release()
			return -1, errnoOf(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			release()
			return -1, errnoOf(err)
		}
		last := len(comps) == 0
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK && (!last || followLast) {
			target, e := readLinkFD(fd)
			syscall.Close(fd)
			links++
			switch {
			case e != 0:
				release()
				return -1, e
			case resolve&resolveNoSymlinks != 0 || links > maxLinks:
				release()
				return -1, syscall.ELOOP
			case strings.HasPrefix(target, "/"):
				if beneath {
					release()
					return -1, syscall.EXDEV
				}
				if e := reset(top, "/"); e != 0 {
					return -1, e
				}
			}
			comps = append(components(target), comps...)
			continue
		}
		if last {
			release()
			if dirOnly && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				syscall.Close(fd)
				return -1, syscall.ENOTDIR
			}
			return fd, 0
		}
		stack = append(stack, fd)
	}
	// The name ended in "." or "..": the directory reached is the answer.
	fd := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	release()
	return fd, 0
}

// components splits a name into the parts a lookup steps through.
func components(name string) []string {
	var out []string
	for _, c := range strings.Split(name, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// readLinkFD reads the target of the symbolic link fd (an O_PATH|O_NOFOLLOW
// descriptor of the link itself).
func readLinkFD(fd int) (string, syscall.Errno) {
	buf := make([]byte, 4096)
	empty := [1]byte{}
	n, _, e := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if e != 0 {
		return "", e
	}
	if int(n) >= len(buf) {
		return "", syscall.ENAMETOOLONG
	}
	return string(buf[:n]), 0
}

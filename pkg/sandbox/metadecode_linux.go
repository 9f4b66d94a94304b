//go:build linux && (amd64 || arm64)

package sandbox

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"syscall"
)

// Bounds on what the guard reads of a program's memory for one call,
// those of the kernel itself.
const (
	maxGuardPath  = 4096  // PATH_MAX, the NUL included
	maxXattrName  = 256   // XATTR_NAME_MAX + 1
	maxXattrValue = 65536 // XATTR_SIZE_MAX
)

// Flags the calls take (AT_*, XATTR_*).
const (
	atFDCWD           = -100
	atSymlinkNoFollow = 0x100
	atEmptyPath       = 0x1000
	xattrCreate       = 1
	xattrReplace      = 2
	utimeNow          = (1 << 30) - 1 // UTIME_NOW
	utimeOmit         = (1 << 30) - 2 // UTIME_OMIT
)

// metaOp is the change one call asks for.
type metaOp uint8

const (
	opChmod metaOp = iota + 1
	opChown
	opTimes
	opSetxattr
	opRemovexattr
)

// metaReq is one decoded metadata call: the object (a path relative to
// dirfd, or dirfd itself) and the change.
type metaReq struct {
	op       metaOp
	dirfd    int    // atFDCWD or one of the program's descriptors
	path     string // "" with byFD
	byFD     bool   // the object is dirfd itself
	emptyOK  bool   // AT_EMPTY_PATH: an empty path names dirfd
	follow   bool   // a trailing symbolic link is followed
	mode     uint32
	uid, gid uint32
	times    *[2]syscall.Timespec // nil: now
	name     string
	value    []byte
	xflags   int
}

// memReader copies the program's memory at addr into b and returns how
// many bytes it could read (fewer at an unreadable page).
type memReader func(addr uint64, b []byte) int

// decodeCall decodes the arguments of one call of kind, reading what they
// point to through read, with the checks the kernel makes before it looks
// a path up. It returns the request or the errno to answer.
func decodeCall(kind callKind, args [6]uint64, read memReader) (metaReq, syscall.Errno) {
	r := metaReq{dirfd: atFDCWD, follow: true}
	var e syscall.Errno
	fd := func(a uint64) int { return int(int32(uint32(a))) }
	switch kind {
	case callChmod, callChown, callLchown, callUtime, callUtimes, callSetxattr, callLsetxattr, callRemovexattr, callLremovexattr:
		r.path, e = readPath(read, args[0])
		r.follow = kind != callLchown && kind != callLsetxattr && kind != callLremovexattr
	case callFchmod, callFchown, callFsetxattr, callFremovexattr:
		r.dirfd, r.byFD = fd(args[0]), true
	case callFchmodat, callFchmodat2, callFchownat, callFutimesat, callUtimensat:
		r.dirfd = fd(args[0])
		if args[1] == 0 && (kind == callFutimesat || kind == callUtimensat) && r.dirfd != atFDCWD {
			r.byFD = true // futimens: no path, the descriptor itself
		} else {
			r.path, e = readPath(read, args[1])
		}
	default:
		return r, syscall.ENOSYS
	}
	if e != 0 {
		return r, e
	}
	switch kind {
	case callChmod, callFchmod:
		r.op, r.mode = opChmod, uint32(args[1])&0o7777
	case callFchmodat:
		r.op, r.mode = opChmod, uint32(args[2])&0o7777
	case callFchmodat2:
		r.op, r.mode = opChmod, uint32(args[2])&0o7777
		e = r.atFlags(args[3])
	case callChown, callLchown, callFchown:
		r.op, r.uid, r.gid = opChown, uint32(args[1]), uint32(args[2])
	case callFchownat:
		r.op, r.uid, r.gid = opChown, uint32(args[2]), uint32(args[3])
		e = r.atFlags(args[4])
	case callUtime:
		r.op = opTimes
		r.times, e = readUtimbuf(read, args[1])
	case callUtimes:
		r.op = opTimes
		r.times, e = readTimevals(read, args[1])
	case callFutimesat:
		r.op = opTimes
		r.times, e = readTimevals(read, args[2])
	case callUtimensat:
		r.op = opTimes
		if r.byFD && args[3] != 0 {
			return r, syscall.EINVAL
		}
		if e = r.atFlags(args[3]); e == 0 {
			r.times, e = readTimespecs(read, args[2])
		}
	case callSetxattr, callLsetxattr, callFsetxattr:
		r.op = opSetxattr
		e = r.readXattr(read, args[1], args[2], args[3], args[4])
	case callRemovexattr, callLremovexattr, callFremovexattr:
		r.op = opRemovexattr
		r.name, e = readName(read, args[1])
	}
	return r, e
}

// atFlags applies AT_SYMLINK_NOFOLLOW and AT_EMPTY_PATH; any other flag
// is EINVAL.
func (r *metaReq) atFlags(f uint64) syscall.Errno {
	if f&^(atSymlinkNoFollow|atEmptyPath) != 0 {
		return syscall.EINVAL
	}
	r.follow = f&atSymlinkNoFollow == 0
	r.emptyOK = f&atEmptyPath != 0
	return 0
}

func (r *metaReq) readXattr(read memReader, name, value, size, flags uint64) syscall.Errno {
	if flags&^(xattrCreate|xattrReplace) != 0 {
		return syscall.EINVAL
	}
	r.xflags = int(flags)
	var e syscall.Errno
	if r.name, e = readName(read, name); e != 0 {
		return e
	}
	if size > maxXattrValue {
		return syscall.E2BIG
	}
	r.value = make([]byte, size)
	if size > 0 && read(value, r.value) != int(size) {
		return syscall.EFAULT
	}
	return 0
}

// readCString reads a NUL-terminated string of at most max bytes (the NUL
// included) at addr: long is the errno when no NUL comes within max.
func readCString(read memReader, addr uint64, max int, long syscall.Errno) (string, syscall.Errno) {
	if addr == 0 {
		return "", syscall.EFAULT
	}
	b := make([]byte, max)
	n := read(addr, b)
	if i := bytes.IndexByte(b[:n], 0); i >= 0 {
		return string(b[:i]), 0
	}
	if n == max {
		return "", long
	}
	return "", syscall.EFAULT
}

func readPath(read memReader, addr uint64) (string, syscall.Errno) {
	return readCString(read, addr, maxGuardPath, syscall.ENAMETOOLONG)
}

// readName reads an extended attribute's name: empty or too long is ERANGE.
func readName(read memReader, addr uint64) (string, syscall.Errno) {
	s, e := readCString(read, addr, maxXattrName, syscall.ERANGE)
	if e == 0 && s == "" {
		return "", syscall.ERANGE
	}
	return s, e
}

// readWords reads n 64-bit words at addr (nil words for a NULL pointer).
func readWords(read memReader, addr uint64, n int) ([]int64, syscall.Errno) {
	if addr == 0 {
		return nil, 0
	}
	b := make([]byte, 8*n)
	if read(addr, b) != len(b) {
		return nil, syscall.EFAULT
	}
	w := make([]int64, n)
	for i := range w {
		w[i] = int64(binary.NativeEndian.Uint64(b[8*i:]))
	}
	return w, 0
}

// readUtimbuf reads struct utimbuf (access and modification seconds).
func readUtimbuf(read memReader, addr uint64) (*[2]syscall.Timespec, syscall.Errno) {
	w, e := readWords(read, addr, 2)
	if e != 0 || w == nil {
		return nil, e
	}
	return &[2]syscall.Timespec{{Sec: w[0]}, {Sec: w[1]}}, 0
}

// readTimevals reads struct timeval[2]; microseconds out of range are
// EINVAL.
func readTimevals(read memReader, addr uint64) (*[2]syscall.Timespec, syscall.Errno) {
	w, e := readWords(read, addr, 4)
	if e != 0 || w == nil {
		return nil, e
	}
	if w[1] < 0 || w[1] >= 1e6 || w[3] < 0 || w[3] >= 1e6 {
		return nil, syscall.EINVAL
	}
	return &[2]syscall.Timespec{{Sec: w[0], Nsec: w[1] * 1000}, {Sec: w[2], Nsec: w[3] * 1000}}, 0
}

// readTimespecs reads struct timespec[2]; nanoseconds must be in range or
// UTIME_NOW or UTIME_OMIT.
func readTimespecs(read memReader, addr uint64) (*[2]syscall.Timespec, syscall.Errno) {
	w, e := readWords(read, addr, 4)
	if e != 0 || w == nil {
		return nil, e
	}
	for _, ns := range []int64{w[1], w[3]} {
		if (ns < 0 || ns >= 1e9) && ns != utimeNow && ns != utimeOmit {
			return nil, syscall.EINVAL
		}
	}
	return &[2]syscall.Timespec{{Sec: w[0], Nsec: w[1]}, {Sec: w[2], Nsec: w[3]}}, 0
}

// ownFD recognises the name a program gives one of its own descriptors,
// /proc/self/fd/N or /proc/thread-self/fd/N exactly: glibc's fchmodat
// with AT_SYMLINK_NOFOLLOW, on a kernel without fchmodat2, opens the file
// O_PATH and changes it by that name. Resolved here those would be the
// guard's descriptors, so the guard takes the program's descriptor N.
func ownFD(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "/proc/self/fd/")
	if !ok {
		rest, ok = strings.CutPrefix(path, "/proc/thread-self/fd/")
	}
	if !ok || rest == "" || len(rest) > 10 || strings.TrimLeft(rest, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	return int(n), err == nil
}

//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// The listener's ioctls and struct sizes (linux/seccomp.h).
const (
	notifRecv    = 0xc0502100 // SECCOMP_IOCTL_NOTIF_RECV, struct seccomp_notif (80 bytes)
	notifSend    = 0xc0182101 // SECCOMP_IOCTL_NOTIF_SEND, struct seccomp_notif_resp (24 bytes)
	notifIDValid = 0x40082102 // SECCOMP_IOCTL_NOTIF_ID_VALID
	notifSize    = 80
	respSize     = 24

	sysOpenat2         = 437
	resolveNoMagicLink = 0x02 // RESOLVE_NO_MAGICLINKS
	resolveNoSymlinks  = 0x04 // RESOLVE_NO_SYMLINKS
	resolveBeneath     = 0x08 // RESOLVE_BENEATH
	pollIn             = 0x1
	pollHangUps        = 0x8 | 0x10 | 0x20 // POLLERR | POLLHUP | POLLNVAL
)

// root is one ReadWrite rule's tree, open since before the program ran;
// its inode, then its name, are read at the first call that needs them
// (the open descriptor keeps the inode, whatever the program renames
// since).
type root struct {
	fd       int
	statted  bool
	dev, ino uint64 // 0, 0 when its stat failed
	named    bool
	name     string
}

type rootSet []root

// openRoots opens the ReadWrite rules that exist; a rule that cannot be
// opened grants nothing here (what cannot be proven inside is refused).
func openRoots(paths []string) rootSet {
	var rs rootSet
	for _, p := range paths {
		if fd, err := syscall.Open(p, oPath|syscall.O_CLOEXEC, 0); err == nil {
			rs = append(rs, root{fd: fd})
		}
	}
	return rs
}

// ident fills in r's inode; it reports false when it cannot.
func (r *root) ident() bool {
	if !r.statted {
		var st syscall.Stat_t
		if syscall.Fstat(r.fd, &st) == nil {
			r.dev, r.ino = st.Dev, st.Ino
		}
		r.statted = true
	}
	return r.dev != 0 || r.ino != 0
}

// lookup fills in r's name and inode; it reports false when it cannot.
func (r *root) lookup() bool {
	if !r.named {
		if name, ok := fdName(r.fd); ok && r.ident() {
			r.name = name
		}
		r.named = true
	}
	return r.name != ""
}

// isRoot reports whether st is one of the roots themselves, or may be:
// a root whose inode cannot be read counts as this one.
func (rs rootSet) isRoot(st *syscall.Stat_t) bool {
	for i := range rs {
		if r := &rs[i]; !r.ident() || st.Dev == r.dev && st.Ino == r.ino {
			return true
		}
	}
	return false
}

func (rs rootSet) close() {
	for _, r := range rs {
		syscall.Close(r.fd)
	}
}

// fdName is what the kernel calls the object fd refers to (its path from
// the root, or pipe:[…] and the like).
func fdName(fd int) (string, bool) {
	b := make([]byte, maxGuardPath+64)
	n, err := syscall.Readlink("/proc/self/fd/"+strconv.Itoa(fd), b)
	if err != nil || n >= len(b) {
		return "", false
	}
	return string(b[:n]), true
}

// handle receives one notification and answers it (net: what the guard
// allows of the network, nil when disarmed); it reports false when the
// listener no longer works.
func (rs rootSet) handle(lfd int, net *netArm) bool {
	var n [notifSize]byte
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifRecv, uintptr(unsafe.Pointer(&n[0]))); e != 0 {
		return e == syscall.EINTR || e == syscall.ENOENT // ENOENT: the caller is gone
	}
	id := binary.NativeEndian.Uint64(n[0:])
	tid := int(binary.NativeEndian.Uint32(n[8:]))
	nr := binary.NativeEndian.Uint32(n[16:])
	arch := binary.NativeEndian.Uint32(n[20:])
	var args [6]uint64
	for i := range args {
		args[i] = binary.NativeEndian.Uint64(n[32+8*i:])
	}
	errno := syscall.ENOSYS
	if arch == auditArchNative && (nr == sysSocket || nr == sysConnect) {
		a := answerNet(lfd, id, tid, nr, args, net, rs)
		if a.sent {
			return true
		}
		errno = a.errno
	} else if arch == auditArchNative {
		for _, c := range nativeCalls {
			if c.nr == nr {
				errno = rs.answer(lfd, id, tid, c.kind, args)
				break
			}
		}
	}
	var resp [respSize]byte
	binary.NativeEndian.PutUint64(resp[0:], id)
	binary.NativeEndian.PutUint32(resp[16:], uint32(-int32(errno)))
	syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifSend, uintptr(unsafe.Pointer(&resp[0])))
	return true
}

// answer decodes, checks and performs one call for thread tid; it returns
// the errno the call answers (0: done).
func (rs rootSet) answer(lfd int, id uint64, tid int, kind callKind, args [6]uint64) syscall.Errno {
	if len(rs) == 0 {
		return syscall.EACCES // disarmed, or no writable tree: nothing is inside
	}
	req, e := decodeCall(kind, args, func(addr uint64, b []byte) int { return readMemory(tid, addr, b) })
	if e != 0 {
		return e
	}
	obj, e := openObject(tid, &req)
	if e != 0 {
		return e
	}
	defer syscall.Close(obj)
	// What was read of the program and its /proc entries belongs to the
	// caller only while the call still waits: a thread id can be reused.
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifIDValid, uintptr(unsafe.Pointer(&id))); e != 0 {
		return syscall.ENOENT
	}
	var st syscall.Stat_t
	if syscall.Fstat(obj, &st) != nil || !rs.inside(obj, &st) {
		return syscall.EACCES
	}
	if rs.isRoot(&st) || !allowedChange(&req) {
		return syscall.EPERM
	}
	return perform(obj, &st, &req)
}

// allowedChange reports whether the guard makes a change of this kind
// beneath a root at all: no set-user-ID or set-group-ID bit (the sticky
// bit, which Linux ignores on anything but a directory, is left alone),
// and only user.* extended attributes and POSIX ACLs (security.* holds
// file capabilities and labels, trusted.* the overlay filesystem's
// controls). The roots themselves change in no way (isRoot): their mode,
// owner, times and ACLs are the Worker's.
func allowedChange(req *metaReq) bool {
	switch req.op {
	case opChmod:
		return req.mode&(syscall.S_ISUID|syscall.S_ISGID) == 0
	case opSetxattr, opRemovexattr:
		return strings.HasPrefix(req.name, "user.") ||
			req.name == "system.posix_acl_access" || req.name == "system.posix_acl_default"
	}
	return true
}

// readMemory copies thread tid's memory at addr into b, one page per
// piece so that an unreadable page ends the copy there instead of failing
// it; it returns how many bytes were copied.
func readMemory(tid int, addr uint64, b []byte) int {
	page := uint64(os.Getpagesize())
	var remote [maxXattrValue/4096 + 2][2]uintptr // struct iovec
	k := 0
	for off := uint64(0); off < uint64(len(b)) && k < len(remote); k++ {
		a := addr + off
		if a < addr {
			break // wrapped around
		}
		l := page - a%page
		if l > uint64(len(b))-off {
			l = uint64(len(b)) - off
		}
		remote[k] = [2]uintptr{uintptr(a), uintptr(l)}
		off += l
	}
	if k == 0 {
		return 0
	}
	local := [2]uintptr{uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))}
	n, _, e := syscall.Syscall6(sysProcessVMReadv, uintptr(tid), uintptr(unsafe.Pointer(&local)), 1,
		uintptr(unsafe.Pointer(&remote[0])), uintptr(k), 0)
	if e != 0 {
		return 0
	}
	return int(n)
}

// openObject opens (O_PATH) the object req names, as thread tid would
// resolve it: relative paths from its working directory or its dirfd,
// a descriptor of its own (also named /proc/self/fd/N) through
// /proc/<tid>/fd. Other magic links (/proc/<pid>/fd/…, /proc/self/cwd,
// …) in the program's path are refused: from here they would name the
// guard's own objects, or another process's, not the program's.
func openObject(tid int, req *metaReq) (int, syscall.Errno) {
	proc := "/proc/" + strconv.Itoa(tid)
	dir := func(fd int) string {
		if fd == atFDCWD {
			return proc + "/cwd"
		}
		return proc + "/fd/" + strconv.Itoa(fd)
	}
	if n, ok := ownFD(req.path); ok && req.follow {
		req.dirfd, req.byFD = n, true
	}
	if req.byFD || (req.path == "" && req.emptyOK) {
		if req.dirfd < 0 && (req.byFD || req.dirfd != atFDCWD) {
			return -1, syscall.EBADF
		}
		fd, err := syscall.Open(dir(req.dirfd), oPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			return -1, syscall.EBADF
		}
		return fd, 0
	}
	if req.path == "" {
		return -1, syscall.ENOENT
	}
	base := atFDCWD // an absolute path ignores it
	if req.path[0] != '/' {
		if req.dirfd < 0 && req.dirfd != atFDCWD {
			return -1, syscall.EBADF
		}
		fd, err := syscall.Open(dir(req.dirfd), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err == syscall.ENOTDIR {
			return -1, syscall.ENOTDIR
		} else if err != nil {
			return -1, syscall.EBADF
		}
		defer syscall.Close(fd)
		base = fd
	}
	flags := uint64(oPath | syscall.O_CLOEXEC)
	if !req.follow {
		flags |= syscall.O_NOFOLLOW
	}
	fd, e := openat2(base, req.path, flags, resolveNoMagicLink)
	switch e {
	case 0:
		return fd, 0
	case syscall.ENOENT, syscall.ENOTDIR, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EACCES:
		return -1, e
	}
	return -1, syscall.EACCES
}

// openat2 is openat2(2) with struct open_how {flags, mode 0, resolve};
// where the kernel call answers ENOSYS, walkOpen does its work.
func openat2(dirfd int, path string, flags, resolve uint64) (int, syscall.Errno) {
	fd, e := openat2raw(dirfd, path, flags, resolve)
	if e == syscall.ENOSYS {
		return walkOpen(dirfd, path, flags, resolve)
	}
	return fd, e
}

// openat2raw is the kernel call alone.
func openat2raw(dirfd int, path string, flags, resolve uint64) (int, syscall.Errno) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, syscall.EINVAL
	}
	how := [3]uint64{flags, 0, resolve}
	fd, _, e := syscall.Syscall6(sysOpenat2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&how[0])), unsafe.Sizeof(how), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), 0
}

// inside reports whether obj (whose stat is st) lies beneath one of the
// roots: the kernel's name for it must lead, from a root and without any
// symbolic link, to the same inode (RESOLVE_BENEATH keeps the lookup
// under the root). An object with no name left at all (an unlinked file,
// a memfd) is nobody else's and counts as inside.
func (rs rootSet) inside(obj int, st *syscall.Stat_t) bool {
	if st.Nlink == 0 && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return true
	}
	name, ok := fdName(obj)
	if !ok || !strings.HasPrefix(name, "/") {
		return false
	}
	for i := range rs {
		r := &rs[i]
		if !r.lookup() {
			continue
		}
		if name == r.name {
			if st.Dev == r.dev && st.Ino == r.ino {
				return true
			}
			continue
		}
		rel, ok := strings.CutPrefix(name, strings.TrimSuffix(r.name, "/")+"/")
		if !ok || rel == "" {
			continue
		}
		fd, e := openat2(r.fd, rel, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, resolveBeneath|resolveNoSymlinks)
		if e != 0 {
			continue
		}
		var got syscall.Stat_t
		same := syscall.Fstat(fd, &got) == nil && got.Dev == st.Dev && got.Ino == st.Ino
		syscall.Close(fd)
		if same {
			return true
		}
	}
	return false
}

// perform makes the change on obj (an O_PATH descriptor of the guard's
// own) with the guard's credentials, the program's as it started (with
// no_new_privs it can only have dropped some since), and returns its
// errno.
func perform(obj int, st *syscall.Stat_t, req *metaReq) syscall.Errno {
	self := "/proc/self/fd/" + strconv.Itoa(obj)
	link := st.Mode&syscall.S_IFMT == syscall.S_IFLNK
	empty := [1]byte{}
	var e syscall.Errno
	switch req.op {
	case opChmod:
		if link {
			return syscall.EOPNOTSUPP // what fchmodat2 answers for a link it does not follow
		}
		e = errnoOf(syscall.Chmod(self, req.mode))
	case opChown:
		_, _, e = syscall.Syscall6(syscall.SYS_FCHOWNAT, uintptr(obj), uintptr(unsafe.Pointer(&empty[0])),
			uintptr(req.uid), uintptr(req.gid), atEmptyPath|atSymlinkNoFollow, 0)
	case opTimes:
		var tp uintptr
		if req.times != nil {
			tp = uintptr(unsafe.Pointer(req.times))
		}
		_, _, e = syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(obj), uintptr(unsafe.Pointer(&empty[0])), tp,
			atEmptyPath|atSymlinkNoFollow, 0, 0)
	case opSetxattr, opRemovexattr:
		if link {
			return syscall.EPERM // user.* attributes are for files and directories only
		}
		p, err1 := syscall.BytePtrFromString(self)
		n, err2 := syscall.BytePtrFromString(req.name)
		if err1 != nil || err2 != nil {
			return syscall.EINVAL
		}
		if req.op == opSetxattr {
			var v uintptr
			if len(req.value) > 0 {
				v = uintptr(unsafe.Pointer(&req.value[0]))
			}
			_, _, e = syscall.Syscall6(syscall.SYS_SETXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(n)),
				v, uintptr(len(req.value)), uintptr(req.xflags), 0)
		} else {
			_, _, e = syscall.Syscall(syscall.SYS_REMOVEXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(n)), 0)
		}
	default:
		return syscall.ENOSYS
	}
	return e
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EACCES
}

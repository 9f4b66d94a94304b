//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// The listener's requests for the network calls (linux/seccomp.h).
const (
	notifAddFD      = 0x40182103 // SECCOMP_IOCTL_NOTIF_ADDFD, struct seccomp_notif_addfd (24 bytes)
	addFDFlagSend   = 1 << 1     // SECCOMP_ADDFD_FLAG_SEND: the new descriptor is the call's result
	maxSockaddr     = 128        // sizeof(struct sockaddr_storage)
	sockaddrIn      = 16         // sizeof(struct sockaddr_in)
	sockaddrIn6Min  = 24         // SIN6_LEN_RFC2133: the least an IPv6 connect takes
	loopbackDevice  = "lo"
	sockCloexecFlag = 0x80000 // SOCK_CLOEXEC
	soDomain        = 39      // SO_DOMAIN
	sysPidfdOpen    = 434
	sysPidfdGetfd   = 438
	pidfdThread     = syscall.O_EXCL // PIDFD_THREAD: a pidfd of the thread itself (Linux 6.9)
)

// netArm is what an armed guard allows of the network: its policy's
// Connect endpoints, and where it counts what it refuses.
type netArm struct {
	connect  []netip.AddrPort
	refusals *Refusals
}

// netAnswer is how the guard answers one network call: an errno, or
// nothing more (sent: the answer went with a descriptor).
type netAnswer struct {
	errno syscall.Errno
	sent  bool
}

// answerNet answers socket and connect for thread tid. A disarmed guard
// (na nil) refuses both.
//
// A TCP socket is made here, bound to the loopback device
// (SO_BINDTODEVICE, which a program can no longer change once it is set:
// that needs CAP_NET_RAW), and handed to the program as the call's
// result: whatever address it connects it to, it reaches only this host,
// and a socket it listens on hears only loopback.
//
// Every connect is made here, on the program's own socket (pidfd_getfd),
// to the address as read once (bounded), so a program that rewrites the
// address or swaps the descriptor once they were read changes nothing;
// none is left to the kernel (a continued call would read the address
// again). On a TCP socket it is refused (EACCES) and counted unless it
// is one of the policy's endpoints. On a UNIX socket see connectUnix. On
// any other (routing netlink, the only other kind the filter lets a
// program make) the address read is connected as it is.
func answerNet(lfd int, id uint64, tid int, nr uint32, args [6]uint64, na *netArm, rs rootSet) netAnswer {
	if na == nil {
		return netAnswer{errno: syscall.EACCES}
	}
	switch nr {
	case sysSocket:
		return makeSocket(lfd, id, args)
	case sysConnect:
		return connectFor(lfd, id, tid, args, na, rs)
	}
	return netAnswer{errno: syscall.ENOSYS}
}

// connectFor answers one connect (see answerNet).
func connectFor(lfd int, id uint64, tid int, args [6]uint64, na *netArm, rs rootSet) netAnswer {
	pidfd, e := callerPidfd(tid, pidfdOpen)
	if e != 0 {
		return netAnswer{errno: syscall.ENOENT} // the caller is gone
	}
	defer syscall.Close(pidfd)
	// A thread id can be reused: the pidfd is the caller's only while
	// the call still waits.
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifIDValid, uintptr(unsafe.Pointer(&id))); e != 0 {
		return netAnswer{errno: syscall.ENOENT}
	}
	sfd, _, e := syscall.Syscall(sysPidfdGetfd, uintptr(pidfd), uintptr(int32(uint32(args[0]))), 0)
	if e != 0 {
		return netAnswer{errno: syscall.EBADF}
	}
	defer syscall.Close(int(sfd))
	dom, err := syscall.GetsockoptInt(int(sfd), syscall.SOL_SOCKET, soDomain)
	if err != nil {
		return netAnswer{errno: syscall.ENOTSOCK}
	}
	n := int(int32(uint32(args[2])))
	if n < 0 || n > maxSockaddr {
		return netAnswer{errno: syscall.EINVAL} // what the kernel answers
	}
	b := make([]byte, max(n, 1))
	if readMemory(tid, args[1], b[:n]) != n {
		return netAnswer{errno: syscall.EFAULT}
	}
	b = b[:n]
	switch dom {
	case afInet, afInet6:
	case syscall.AF_UNIX:
		return connectUnix(lfd, id, tid, int(sfd), b, rs)
	default:
		return netAnswer{errno: connectRaw(int(sfd), b)}
	}
	ep, inet, ok := decodeSockaddr(b)
	unspec := len(b) >= 2 && binary.NativeEndian.Uint16(b) == syscall.AF_UNSPEC // a disconnect
	if unspec || inet && ok && allowsConnect(na.connect, ep) {
		e := connectRaw(int(sfd), b)
		if !unspec && (e == syscall.EISCONN || e == syscall.EALREADY) {
			e = restarted(int(sfd), ep, e)
		}
		return netAnswer{errno: e}
	}
	switch {
	case !inet:
		return netAnswer{errno: syscall.EAFNOSUPPORT} // what TCP answers
	case !ok:
		return netAnswer{errno: syscall.EINVAL}
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifIDValid, uintptr(unsafe.Pointer(&id))); e != 0 {
		return netAnswer{errno: syscall.ENOENT}
	}
	na.refusals.Add(ep.Addr().Unmap().WithZone("").String(), ep.Port())
	return netAnswer{errno: syscall.EACCES}
}

// pidfdOpen is pidfd_open(2).
func pidfdOpen(pid int, flags uintptr) (int, syscall.Errno) {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), flags, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), 0
}

// callerPidfd opens (with open, pidfdOpen but in tests) a pidfd through
// which pidfd_getfd reads the descriptors of thread tid: the thread's
// own (PIDFD_THREAD), or, where the kernel does not know that flag
// (EINVAL: Linux before 6.9, 6.7 and 6.8 among the kernels Landlock ABI 4
// needs), its process's (the thread group leader named in
// /proc/<tid>/status), whose descriptor table the thread shares unless it
// unshared it: then the guard reads the process's descriptor of that
// number, a socket of the program's still, which it connects only where
// the policy allows. The caller confirms afterwards that the call still
// waits (a thread id can be reused).
func callerPidfd(tid int, open func(int, uintptr) (int, syscall.Errno)) (int, syscall.Errno) {
	fd, e := open(tid, pidfdThread)
	if e != syscall.EINVAL {
		return fd, e
	}
	b := make([]byte, maxStatus)
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return -1, syscall.ESRCH
	}
	n, _ := io.ReadFull(f, b)
	f.Close()
	tgid, ok := parseTgid(b[:n])
	if !ok {
		return -1, syscall.ESRCH
	}
	return open(tgid, 0)
}

// maxStatus bounds what is read of /proc/<tid>/status: Tgid is its
// fourth line, well within.
const maxStatus = 4096

// parseTgid finds the "Tgid:\t<n>" line of a /proc/<tid>/status text: a
// positive decimal below PID_MAX_LIMIT (2^22).
func parseTgid(b []byte) (int, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "Tgid:")
		if !ok {
			continue
		}
		v = strings.TrimLeft(v, " \t")
		if v == "" || len(v) > 7 || strings.TrimLeft(v, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		return n, err == nil && n > 0 && n <= 1<<22
	}
	return 0, false
}

// connectWait bounds how long the guard waits in one connect on a
// blocking socket: the program's other calls wait behind it (its guard
// answers one call at a time), and so does the end of its attempt. A
// UNIX connect to a listener whose backlog is full waits until it
// accepts, which it may never do; a TCP one for a listener that drops
// SYNs, for minutes.
const connectWait = time.Second

// connectRaw connects fd, a duplicate of the program's socket, to the
// address b as it is and returns the errno. On a blocking socket the
// kernel's wait is bounded by connectWait (SO_SNDTIMEO, which bounds a
// connect's wait, set for the call and put back after): past it a TCP
// connect answers EINPROGRESS (it goes on), a UNIX one EAGAIN.
func connectRaw(fd int, b []byte) syscall.Errno {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	if fl, err := fcntlGetfl(fd); err == nil && fl&syscall.O_NONBLOCK == 0 {
		if old, err := getTimeval(fd); err == nil {
			bound := syscall.NsecToTimeval(connectWait.Nanoseconds())
			if old.Sec == 0 && old.Usec == 0 || old.Nano() > bound.Nano() {
				if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &bound) == nil {
					defer syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &old)
				}
			}
		}
	}
	_, _, e := syscall.Syscall(syscall.SYS_CONNECT, uintptr(fd), uintptr(p), uintptr(len(b)))
	return e
}

func fcntlGetfl(fd int) (int, error) {
	fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if e != 0 {
		return 0, e
	}
	return int(fl), nil
}

// getTimeval reads a socket's SO_SNDTIMEO.
func getTimeval(fd int) (syscall.Timeval, error) {
	var tv syscall.Timeval
	n := uint32(unsafe.Sizeof(tv))
	_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), syscall.SOL_SOCKET, syscall.SO_SNDTIMEO,
		uintptr(unsafe.Pointer(&tv)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return tv, e
	}
	return tv, nil
}

// sockaddrUn is sizeof(struct sockaddr_un).
const sockaddrUn = 110

// connectUnix answers a connect on a UNIX socket (sfd, the program's),
// to the address b it read. Landlock (ABI 7 and below) does not govern
// connecting to a pathname socket, and a per-user service manager or
// session bus takes requests from every process of its account that
// reaches its socket: it would start a process outside the sandbox. So:
//
//   - An abstract address is refused (EPERM, what Landlock's scoping
//     answers for one outside the domain): scoping refuses all of those
//     from ABI 6 on; the guard cannot leave the call to the kernel
//     without letting the address be rewritten to a pathname one, nor
//     make it itself without the scoping.
//   - A pathname is opened here (O_PATH, following links as connect does,
//     no magic link but the program's own descriptors) as the calling
//     thread names it, and the socket found is connected to only when it
//     lies beneath one of the program's read-write trees (its own), or
//     belongs to another account than the Worker's and every account may
//     connect to it (others may write it and search every directory
//     above it): what any process of the host reaches. Refused (EACCES):
//     every socket of the Worker's own account outside the trees (its
//     user manager, its session bus, any other service it runs; for a
//     Worker running as root, the system's manager and bus, container
//     runtimes), and every socket only a group or its owner may use.
//   - The connect is made to that opened socket (/proc/self/fd/N), not
//     to the name again.
//
// Anything else (no AF_UNIX family: AF_UNSPEC disconnects a datagram
// socket) is connected as read, and the kernel answers it.
func connectUnix(lfd int, id uint64, tid, sfd int, b []byte, rs rootSet) netAnswer {
	if len(b) < 2 || binary.NativeEndian.Uint16(b) != syscall.AF_UNIX {
		return netAnswer{errno: connectRaw(sfd, b)}
	}
	if len(b) <= 2 || len(b) > sockaddrUn {
		return netAnswer{errno: syscall.EINVAL}
	}
	path := b[2:]
	if path[0] == 0 {
		return netAnswer{errno: syscall.EPERM}
	}
	for i, c := range path {
		if c == 0 {
			path = path[:i]
			break
		}
	}
	req := metaReq{dirfd: atFDCWD, path: string(path), follow: true}
	obj, e := openObject(tid, &req)
	if e != 0 {
		return netAnswer{errno: e}
	}
	defer syscall.Close(obj)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifIDValid, uintptr(unsafe.Pointer(&id))); e != 0 {
		return netAnswer{errno: syscall.ENOENT}
	}
	var st syscall.Stat_t
	if syscall.Fstat(obj, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return netAnswer{errno: syscall.ECONNREFUSED} // what connect answers for a file that is no socket
	}
	if !rs.inside(obj, &st) && !publicSocket(obj, &st) {
		return netAnswer{errno: syscall.EACCES}
	}
	var sa [sockaddrUn]byte
	binary.NativeEndian.PutUint16(sa[:], syscall.AF_UNIX)
	name := copy(sa[2:], "/proc/self/fd/"+strconv.Itoa(obj))
	e = connectRaw(sfd, sa[:2+name+1])
	if e == syscall.EISCONN {
		// A call restarted after the guard connected it (see restarted).
		if _, err := syscall.Getpeername(sfd); err == nil {
			e = 0
		}
	}
	return netAnswer{errno: e}
}

// publicSocket reports whether the socket obj (stat st) belongs to
// another account than the Worker's and any account may connect to it:
// others may write it and search every directory above it (its name
// from the root, as the kernel gives it).
func publicSocket(obj int, st *syscall.Stat_t) bool {
	if int(st.Uid) == os.Geteuid() || st.Mode&0o002 == 0 {
		return false
	}
	name, ok := fdName(obj)
	if !ok || !strings.HasPrefix(name, "/") {
		return false
	}
	for d := filepath.Dir(name); ; d = filepath.Dir(d) {
		var ds syscall.Stat_t
		if syscall.Stat(d, &ds) != nil || ds.Mode&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// restarted answers a connect the guard already made once: a signal
// that interrupts the program while it waits for the guard's answer
// restarts its call (Go's preemption signal does, often), and the guard
// is asked again about a socket it connected or is connecting. Connected
// to ep, that call succeeded (0); still connecting, it is in progress
// (EINPROGRESS, as the first answer would have been); anything else
// keeps the kernel's errno.
func restarted(fd int, ep netip.AddrPort, e syscall.Errno) syscall.Errno {
	if e == syscall.EALREADY {
		return syscall.EINPROGRESS
	}
	sa, err := syscall.Getpeername(fd)
	if err != nil {
		return e
	}
	var peer netip.AddrPort
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		peer = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *syscall.SockaddrInet6:
		peer = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	if peer.Addr().Unmap() == ep.Addr().Unmap().WithZone("") && peer.Port() == ep.Port() {
		return 0
	}
	return e
}

// makeSocket makes the TCP socket a program asked for, bound to the
// loopback device, and installs it in the program as the call's result.
func makeSocket(lfd int, id uint64, args [6]uint64) netAnswer {
	family, typ, proto := int(int32(uint32(args[0]))), int(int32(uint32(args[1]))), int(int32(uint32(args[2])))
	// The filter sent only these; anything else is refused as it would.
	if family != afInet && family != afInet6 || typ&^sockFlags != sockStream || proto != 0 && proto != ipprotoTCP {
		return netAnswer{errno: syscall.EACCES}
	}
	fd, err := syscall.Socket(family, typ|sockCloexecFlag, proto)
	if err != nil {
		return netAnswer{errno: errnoOf(err)}
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptString(fd, syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, loopbackDevice); err != nil {
		return netAnswer{errno: syscall.EACCES}
	}
	var req [24]byte // struct seccomp_notif_addfd
	binary.NativeEndian.PutUint64(req[0:], id)
	binary.NativeEndian.PutUint32(req[8:], addFDFlagSend)
	binary.NativeEndian.PutUint32(req[12:], uint32(fd))
	if typ&sockCloexecFlag != 0 {
		binary.NativeEndian.PutUint32(req[20:], syscall.O_CLOEXEC)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifAddFD, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return netAnswer{errno: e} // EMFILE and the like; ENOENT: the caller is gone
	}
	return netAnswer{sent: true}
}

// decodeSockaddr reads a connect's address: inet reports an IPv4 or IPv6
// family, ok that it is long enough for the kernel to take it (which
// then answers the short ones itself). The port and addresses are in
// network order; an IPv6 scope is dropped.
func decodeSockaddr(b []byte) (ep netip.AddrPort, inet, ok bool) {
	if len(b) < 2 {
		return netip.AddrPort{}, false, false
	}
	switch binary.NativeEndian.Uint16(b) {
	case afInet:
		if len(b) < sockaddrIn {
			return netip.AddrPort{}, true, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), true, true
	case afInet6:
		if len(b) < sockaddrIn6Min {
			return netip.AddrPort{}, true, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:])), true, true
	}
	return netip.AddrPort{}, false, false
}

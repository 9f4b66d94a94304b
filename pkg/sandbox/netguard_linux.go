//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"unsafe"
)

// The listener's requests for the network calls (linux/seccomp.h).
const (
	notifAddFD      = 0x40182103 // SECCOMP_IOCTL_NOTIF_ADDFD, struct seccomp_notif_addfd (24 bytes)
	addFDFlagSend   = 1 << 1     // SECCOMP_ADDFD_FLAG_SEND: the new descriptor is the call's result
	notifContinue   = 1 << 0     // SECCOMP_USER_NOTIF_FLAG_CONTINUE
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

// netAnswer is how the guard answers one network call: an errno, the
// kernel's own handling of it (cont), or nothing more (sent: the answer
// went with a descriptor).
type netAnswer struct {
	errno syscall.Errno
	cont  bool
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
// A connect on a TCP socket is made here, on the program's own socket
// (pidfd_getfd), to the address as read once (bounded): refused (EACCES)
// and counted unless it is one of the policy's endpoints, so a program
// that rewrites the address once it was read changes nothing. A connect on
// any other socket (UNIX: the only other kind the filter lets a program
// make) is the kernel's (cont), which also keeps Landlock's scoping of
// abstract UNIX sockets. Should the program put a TCP socket in that
// descriptor's place meanwhile, the kernel's checks still hold: Landlock
// lets it connect to the endpoints' ports only, and the socket reaches
// this host only.
func answerNet(lfd int, id uint64, tid int, nr uint32, args [6]uint64, na *netArm) netAnswer {
	if na == nil {
		return netAnswer{errno: syscall.EACCES}
	}
	switch nr {
	case sysSocket:
		return makeSocket(lfd, id, args)
	case sysConnect:
		return connectFor(lfd, id, tid, args, na)
	}
	return netAnswer{errno: syscall.ENOSYS}
}

// connectFor answers one connect (see answerNet).
func connectFor(lfd int, id uint64, tid int, args [6]uint64, na *netArm) netAnswer {
	pidfd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(tid), pidfdThread, 0)
	if e != 0 {
		return netAnswer{errno: syscall.ENOENT} // the caller is gone
	}
	defer syscall.Close(int(pidfd))
	// A thread id can be reused: the pidfd is the caller's only while
	// the call still waits.
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(lfd), notifIDValid, uintptr(unsafe.Pointer(&id))); e != 0 {
		return netAnswer{errno: syscall.ENOENT}
	}
	sfd, _, e := syscall.Syscall(sysPidfdGetfd, pidfd, uintptr(int32(uint32(args[0]))), 0)
	if e != 0 {
		return netAnswer{cont: true} // EBADF and the like: the kernel answers
	}
	defer syscall.Close(int(sfd))
	if dom, err := syscall.GetsockoptInt(int(sfd), syscall.SOL_SOCKET, soDomain); err != nil || dom != afInet && dom != afInet6 {
		return netAnswer{cont: true}
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
	ep, inet, ok := decodeSockaddr(b)
	unspec := len(b) >= 2 && binary.NativeEndian.Uint16(b) == syscall.AF_UNSPEC // a disconnect
	if unspec || inet && ok && allowsConnect(na.connect, ep) {
		_, _, e := syscall.Syscall(syscall.SYS_CONNECT, sfd, uintptr(unsafe.Pointer(&b[0])), uintptr(n))
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

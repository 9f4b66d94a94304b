//go:build linux && (amd64 || arm64)

package sandbox

import "syscall"

// The socket families, types and flags the network part of the filter
// reads (the same values on amd64 and arm64).
const (
	afUnix      = 1
	afInet      = 2
	afInet6     = 10
	afNetlink   = 16
	sockStream  = 1
	sockFlags   = 0x800 | 0x80000 // SOCK_NONBLOCK | SOCK_CLOEXEC
	ipprotoTCP  = 6
	netlinkRt   = 0          // NETLINK_ROUTE
	msgFastOpen = 0x20000000 // MSG_FASTOPEN

	bpfAluAndK = 0x54 // BPF_ALU | BPF_AND | BPF_K
	bpfJsetK   = 0x45 // BPF_JMP | BPF_JSET | BPF_K

	dataArg0L = 16
	dataArg2L = 16 + 8*2
	dataArg3L = 16 + 8*3
)

// netCases sends the network calls to the blocks netBlocks emits: socket
// and socketpair by their arguments, connect to the guard, and the sends
// by their flags.
func netCases(cases map[uint32]string) {
	cases[sysSocket] = "socket"
	cases[sysSocketpair] = "socketpair"
	cases[sysConnect] = "notify"
	cases[sysSendto] = "sendflags3"
	cases[sysSendmsg] = "sendflags2"
	cases[sysSendmmsg] = "sendflags3"
}

// netBlocks emits the network checks, all on register arguments (no
// memory is read, so nothing can change between the check and the call):
//
//   - socket: AF_UNIX is allowed; AF_NETLINK only for NETLINK_ROUTE (the
//     interface and address queries of getaddrinfo and the like; changes
//     need a capability); AF_INET and AF_INET6 only as SOCK_STREAM with
//     protocol 0 or IPPROTO_TCP (not SCTP or MPTCP, which connect by other
//     calls), and those go to the guard, which makes the socket itself,
//     bound to the loopback device; every other family and type (UDP, so
//     no DNS, raw, packet, vsock, ...) fails with EACCES;
//   - socketpair: AF_UNIX only;
//   - connect: to the guard, which refuses every destination but the
//     policy's Connect endpoints early and counts it;
//   - sendto, sendmsg, sendmmsg with MSG_FASTOPEN fail with EOPNOTSUPP
//     (as with the client side of TCP Fast Open turned off): a Fast Open
//     send connects without connect(2), and Landlock does not see it.
func netBlocks(p *bpfProg) {
	p.label("socket")
	p.op(bpfLdAbsW, dataArg0L)
	p.jump(bpfJeqK, afUnix, "allow", "")
	p.jump(bpfJeqK, afNetlink, "netlink", "")
	p.jump(bpfJeqK, afInet, "inet", "")
	p.jump(bpfJeqK, afInet6, "inet", "eacces")
	p.label("netlink")
	p.op(bpfLdAbsW, dataArg2L)
	p.jump(bpfJeqK, netlinkRt, "allow", "eacces")
	p.label("inet")
	p.op(bpfLdAbsW, dataArg1L)
	p.op(bpfAluAndK, ^uint32(sockFlags))
	p.jump(bpfJeqK, sockStream, "", "eacces")
	p.op(bpfLdAbsW, dataArg2L)
	p.jump(bpfJeqK, 0, "notify", "")
	p.jump(bpfJeqK, ipprotoTCP, "notify", "eacces")
	p.label("socketpair")
	p.op(bpfLdAbsW, dataArg0L)
	p.jump(bpfJeqK, afUnix, "allow", "eacces")
	p.label("sendflags2")
	p.op(bpfLdAbsW, dataArg2L)
	p.jump(bpfJsetK, msgFastOpen, "eopnotsupp", "allow")
	p.label("sendflags3")
	p.op(bpfLdAbsW, dataArg3L)
	p.jump(bpfJsetK, msgFastOpen, "eopnotsupp", "allow")
}

// netReturns emits the answers only the network blocks use.
func netReturns(p *bpfProg) {
	p.label("eacces")
	p.op(bpfRetK, retErrno|uint32(syscall.EACCES))
	p.label("eopnotsupp")
	p.op(bpfRetK, retErrno|uint32(syscall.EOPNOTSUPP))
}

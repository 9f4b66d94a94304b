// Package sandbox holds the two halves of the boundary between the trusted
// Agent Forge processes and what the agent runs.
//
// The first half confines the hostile side. A Policy lists the paths a
// sandboxed program may use and how (read-only, read-write, or a device
// it may read and write); RestrictThread turns it into a Landlock domain
// on the calling OS thread, so that the next program that thread starts
// (and everything that program starts) lives inside it. Landlock is used
// through its raw system calls (landlock_create_ruleset, landlock_add_rule,
// landlock_restrict_self) with PR_SET_NO_NEW_PRIVS, at the best ABI the
// kernel offers (ABI reports it): every filesystem right that ABI knows is
// handled, so anything no rule grants is denied, and from ABI 6 on the
// domain is also scoped, so its programs cannot signal processes outside
// it or connect to abstract UNIX sockets created outside it. Landlock
// itself keeps a domain from ptrace and from the ptrace-guarded /proc
// files (environ, mem, fd, maps, ...) of every process outside it, at
// every ABI. TCP is restricted from ABI 4 on (required): no port may be
// bound, and only the ports of the policy's Connect endpoints (the
// Worker's gateway on loopback) connected to.
//
// Landlock does not govern a file's metadata: chmod, chown, utimes and
// extended attributes need only a name. GuardProcess therefore puts a
// process that starts sandboxed programs under a seccomp filter that hands
// every such call (by path, by descriptor, relative to a dirfd or
// AT_EMPTY_PATH) to a Guard served by another, unconfined process
// (SECCOMP_RET_USER_NOTIF); the programs inherit the filter. Armed with
// the running program's Policy, the guard reads the arguments out of the
// caller's memory, opens the object itself as the caller names it (from
// its working directory or descriptor, magic links refused), checks that
// the object it opened lies beneath one of the policy's ReadWrite rules,
// makes the change on that same descriptor and answers with its errno;
// everything else, and every call while it is disarmed, is EACCES; a
// set-ID mode, any change of a root itself and attributes outside user.*
// and the POSIX ACLs are EPERM. The filter refuses the compat table (i386
// on amd64, arm on arm64), x32 and io_uring whole (a ring's operations
// pass no seccomp filter), and allows only the ioctl commands it lists
// (the inode ioctls, chattr, fs-verity and fscrypt among the refused).
//
// The same filter keeps the network to the policy's Connect endpoints
// (netfilter_linux.go, netguard_linux.go): socket families and types are
// checked in registers (UNIX, routing netlink and TCP only), a TCP socket
// is made by the guard, bound to the loopback device, and installed in
// the program; every TCP connect is made by the guard on the program's
// socket to the address it read, refused and counted (Refusals) unless it
// is an endpoint; every UNIX connect too, to a pathname socket of the
// program's read-write trees or of another account open to all only
// (never the Worker's own account's: its user manager, its session bus),
// never to an abstract one; sends with MSG_FASTOPEN are refused.
//
// Every capability of the thread is dropped too (bounding set, securebits
// locked, ambient, effective, permitted, inheritable): Landlock's ptrace
// check does not hold against CAP_SYS_PTRACE, so a Worker running as root
// starts programs that are uid 0 without any privilege.
//
// A domain applies to a thread and cannot be lifted, so the caller
// (pkg/supervise's reaper) restricts a locked thread that it never gives
// back to the Go runtime, and starts exactly one program from it.
//
// The second half protects the trusted side: ProtectSelf makes the
// calling process non-dumpable (PR_SET_DUMPABLE 0), so that no process of
// the same account, sandboxed or not, can read its /proc/<pid>/environ or
// memory or attach to it. Gate, Worker, forge-github and the reaper call
// it before they read any secret.
//
// Off Linux there is no Landlock: ABI reports 0, RestrictThread fails,
// GuardProcess and Serve fail (also on Linux architectures other
// than amd64 and arm64), and ProtectSelf does nothing.
package sandbox

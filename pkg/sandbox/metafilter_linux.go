//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// seccomp(2) and classic BPF, as the metadata filter uses them.
const (
	seccompSetModeFilter   = 1      // SECCOMP_SET_MODE_FILTER
	seccompFlagTsync       = 1 << 0 // SECCOMP_FILTER_FLAG_TSYNC
	seccompFlagNewListener = 1 << 3 // SECCOMP_FILTER_FLAG_NEW_LISTENER
	seccompFlagTsyncESRCH  = 1 << 4 // SECCOMP_FILTER_FLAG_TSYNC_ESRCH (needed with a listener)

	retKillProcess = 0x80000000 // SECCOMP_RET_KILL_PROCESS
	retErrno       = 0x00050000 // SECCOMP_RET_ERRNO | errno
	retUserNotif   = 0x7fc00000 // SECCOMP_RET_USER_NOTIF
	retAllow       = 0x7fff0000 // SECCOMP_RET_ALLOW

	bpfLdAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgtK   = 0x25 // BPF_JMP | BPF_JGT | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	// Offsets in struct seccomp_data (little-endian: an argument's low
	// half comes first).
	dataNr    = 0
	dataArch  = 4
	dataArg1L = 16 + 8*1
)

// Numbers shared by every Linux architecture (the unified table from 424
// on): the *at extended-attribute calls and file_setattr are refused with
// ENOSYS (callers fall back to the calls the guard serves) or EPERM.
const (
	sysFchmodat2    = 452
	sysSetxattrat   = 463
	sysRemovexattat = 466
	sysFileSetattr  = 469
)

// io_uring's calls, the same on every Linux architecture: refused with
// ENOSYS (as on a kernel without io_uring; programs fall back to plain
// system calls). A ring's operations (IORING_OP_SETXATTR among them) run
// in the kernel without passing this filter, so no ring may exist.
const (
	sysIoUringSetup    = 425
	sysIoUringEnter    = 426
	sysIoUringRegister = 427
)

// clone3, the same on every Linux architecture, is refused with ENOSYS
// (as on a kernel before 5.3; glibc, musl and Go then use clone, which
// has no cgroup argument). Its CLONE_INTO_CGROUP places the child in the
// cgroup a descriptor names, checked only against write permission on
// the cgroups' common ancestor: a sandboxed program could open the
// Worker's own cgroup (O_PATH, which Landlock does not govern) and start
// a child there, out of its invocation's cgroup and its kill. The filter
// cannot read clone3's arguments (they are in memory), so the call goes
// whole. Its reapers, under the same filter, fork into a program's cgroup
// by moving themselves (pkg/supervise).
const sysClone3 = 435

// ioctlAllowed are the ioctl commands a sandboxed program may issue, on
// any descriptor: terminal and job control (not TIOCSTI, which fakes
// terminal input, nor TIOCLINUX, TIOCCONS, TIOCSETD or TIOCVHANGUP),
// descriptor flags and queue sizes (FIONBIO, FIOCLEX, FIONREAD, ...),
// pseudo-terminal set-up, the socket queries of interfaces and
// timestamps, and the read-only file queries (flags, fsxattr, version,
// extents, block size) and data sharing between files the program opened
// (FICLONE, FICLONERANGE, FIDEDUPERANGE: Landlock governed those opens).
// Every other command fails: an allow-list, because the inode ioctls are
// many (chattr, fs-verity, fscrypt, each filesystem's own) and new ones
// come with kernels, and each needs only a descriptor opened for reading,
// which Landlock grants outside the read-write trees.
var ioctlAllowed = [...][2]uint32{ // inclusive ranges
	{0x2, 0x2},               // FIGETBSZ
	{0x5401, 0x5411},         // TCGETS ... TIOCOUTQ
	{0x5413, 0x541b},         // TIOCGWINSZ ... FIONREAD
	{0x5420, 0x5422},         // TIOCPKT, FIONBIO, TIOCNOTTY
	{0x5424, 0x5425},         // TIOCGETD, TCSBRKP
	{0x5427, 0x5429},         // TIOCSBRK, TIOCCBRK, TIOCGSID
	{0x5441, 0x5441},         // TIOCGPTPEER
	{0x5450, 0x5452},         // FIONCLEX, FIOCLEX, FIOASYNC
	{0x5460, 0x5460},         // FIOQSIZE
	{0x8901, 0x8907},         // FIOSETOWN ... SIOCGSTAMPNS
	{0x8910, 0x8910},         // SIOCGIFNAME
	{0x8912, 0x8913},         // SIOCGIFCONF, SIOCGIFFLAGS
	{0x8915, 0x8915},         // SIOCGIFADDR
	{0x8917, 0x8917},         // SIOCGIFDSTADDR
	{0x8919, 0x8919},         // SIOCGIFBRDADDR
	{0x891b, 0x891b},         // SIOCGIFNETMASK
	{0x891d, 0x891d},         // SIOCGIFMETRIC
	{0x8921, 0x8921},         // SIOCGIFMTU
	{0x8927, 0x8927},         // SIOCGIFHWADDR
	{0x8933, 0x8933},         // SIOCGIFINDEX
	{0x8942, 0x8942},         // SIOCGIFTXQLEN
	{0x894b, 0x894b},         // SIOCOUTQNSD
	{0x40045431, 0x40045431}, // TIOCSPTLCK
	{0x40045436, 0x40045436}, // TIOCSIG
	{0x40049409, 0x40049409}, // FICLONE
	{0x4020940d, 0x4020940d}, // FICLONERANGE
	{0x402c542b, 0x402c542d}, // TCSETS2, TCSETSW2, TCSETSF2
	{0x80045430, 0x80045430}, // TIOCGPTN
	{0x80045432, 0x80045432}, // TIOCGDEV
	{0x80045438, 0x80045439}, // TIOCGPKT, TIOCGPTLCK
	{0x80045440, 0x80045440}, // TIOCGEXCL
	{0x80046601, 0x80046601}, // FS_IOC32_GETFLAGS
	{0x80047601, 0x80047601}, // FS_IOC32_GETVERSION
	{0x80086601, 0x80086601}, // FS_IOC_GETFLAGS
	{0x80087601, 0x80087601}, // FS_IOC_GETVERSION
	{0x80108906, 0x80108907}, // SIOCGSTAMP_NEW, SIOCGSTAMPNS_NEW
	{0x801c581f, 0x801c581f}, // FS_IOC_FSGETXATTR
	{0x802c542a, 0x802c542a}, // TCGETS2
	{0xc0189436, 0xc0189436}, // FIDEDUPERANGE
	{0xc020660b, 0xc020660b}, // FS_IOC_FIEMAP
}

// ioctlMetadata are the refused commands that change an inode's
// metadata, which fail with EPERM (as chmod outside would) rather than
// ENOTTY, the answer to every other command not allowed: its flags,
// fsxattr (chattr) and generation, fs-verity (which makes a file's
// contents immutable for good) and fscrypt (which makes an empty
// directory unusable without a key).
var ioctlMetadata = [...]uint32{
	0x40046602, // FS_IOC32_SETFLAGS
	0x40047602, // FS_IOC32_SETVERSION
	0x40086602, // FS_IOC_SETFLAGS
	0x40087602, // FS_IOC_SETVERSION
	0x401c5820, // FS_IOC_FSSETXATTR
	0x40806685, // FS_IOC_ENABLE_VERITY
	0x800c6613, // FS_IOC_SET_ENCRYPTION_POLICY
	0xc0406618, // FS_IOC_REMOVE_ENCRYPTION_KEY
	0xc0406619, // FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS
	0xc0506617, // FS_IOC_ADD_ENCRYPTION_KEY
}

// callKind is how the guard decodes one metadata system call's arguments.
type callKind uint8

const (
	callChmod        callKind = iota + 1 // path, mode (follows)
	callFchmod                           // fd, mode
	callFchmodat                         // dirfd, path, mode (follows)
	callFchmodat2                        // dirfd, path, mode, flags
	callChown                            // path, uid, gid (follows)
	callLchown                           // path, uid, gid
	callFchown                           // fd, uid, gid
	callFchownat                         // dirfd, path, uid, gid, flags
	callUtime                            // path, struct utimbuf *
	callUtimes                           // path, struct timeval[2]
	callFutimesat                        // dirfd, path, struct timeval[2]
	callUtimensat                        // dirfd, path, struct timespec[2], flags
	callSetxattr                         // path, name, value, size, flags (follows)
	callLsetxattr                        // path, name, value, size, flags
	callFsetxattr                        // fd, name, value, size, flags
	callRemovexattr                      // path, name (follows)
	callLremovexattr                     // path, name
	callFremovexattr                     // fd, name
)

// nativeCall is one native system call the guard serves.
type nativeCall struct {
	nr   uint32
	kind callKind
}

// sockFilter is struct sock_filter.
type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// bpfProg assembles a filter whose conditional jumps name their targets
// by label; every jump is forward, as classic BPF requires.
type bpfProg struct {
	ins    []sockFilter
	labels map[string]int
	fixes  []bpfFix
}

type bpfFix struct {
	at     int
	jt, jf string // "" falls through
}

func (p *bpfProg) op(code uint16, k uint32) { p.ins = append(p.ins, sockFilter{code: code, k: k}) }

func (p *bpfProg) jump(code uint16, k uint32, jt, jf string) {
	p.fixes = append(p.fixes, bpfFix{at: len(p.ins), jt: jt, jf: jf})
	p.ins = append(p.ins, sockFilter{code: code, k: k})
}

func (p *bpfProg) label(name string) { p.labels[name] = len(p.ins) }

// resolve fills in the jump offsets; it reports false when a label is
// missing, behind its jump, or too far for an 8-bit offset.
func (p *bpfProg) resolve() bool {
	off := func(at int, name string) (uint8, bool) {
		if name == "" {
			return 0, true
		}
		to, ok := p.labels[name]
		ok = ok && to >= 0
		d := to - at - 1
		return uint8(d), ok && d >= 0 && d <= 255
	}
	for _, f := range p.fixes {
		jt, ok1 := off(f.at, f.jt)
		jf, ok2 := off(f.at, f.jf)
		if !ok1 || !ok2 {
			return false
		}
		p.ins[f.at].jt, p.ins[f.at].jf = jt, jf
	}
	return true
}

// bpfRange is a run of system call numbers, lo to hi, that a search sends
// to one label.
type bpfRange struct {
	lo, hi uint32
	to     string
}

// ranges sorts cases (number to label) and merges neighbours with the
// same label.
func ranges(cases map[uint32]string) []bpfRange {
	nrs := make([]uint32, 0, len(cases))
	for nr := range cases {
		nrs = append(nrs, nr)
	}
	sort.Slice(nrs, func(i, j int) bool { return nrs[i] < nrs[j] })
	var rs []bpfRange
	for _, nr := range nrs {
		if n := len(rs); n > 0 && rs[n-1].hi+1 == nr && rs[n-1].to == cases[nr] {
			rs[n-1].hi = nr
			continue
		}
		rs = append(rs, bpfRange{nr, nr, cases[nr]})
	}
	return rs
}

// search emits a binary search over rs (sorted, disjoint) that jumps to a
// range's label when the number is in it and to def otherwise: a few
// comparisons per call instead of one per number.
func (p *bpfProg) search(rs []bpfRange, def string) {
	if len(rs) == 1 {
		r := rs[0]
		if r.lo == r.hi {
			p.jump(bpfJeqK, r.lo, r.to, def)
			return
		}
		p.jump(bpfJgtK, r.hi, def, "")
		p.jump(bpfJgeK, r.lo, r.to, def)
		return
	}
	mid := len(rs) / 2
	right := "r" + strconv.Itoa(len(p.ins))
	p.labels[right] = -1 // reserved until placed
	p.jump(bpfJgeK, rs[mid].lo, right, "")
	p.search(rs[:mid], def)
	p.label(right)
	p.search(rs[mid:], def)
}

// metaFilter is the filter: on the native architecture the calls of
// nativeCalls go to the guard (user notification), io_uring, clone3 and
// the unified-table extras are refused, ioctl is allowed for the commands of
// ioctlAllowed only, the network calls are checked by netBlocks, x32 is
// refused (amd64), everything else is allowed;
// every call of the compat architecture (i386 on amd64, arm on arm64)
// fails with ENOSYS, as under the installed Worker unit's
// SystemCallArchitectures=native; any other architecture kills the
// process.
//
// The filter reads nothing but the architecture and the number before it
// allows a call, so that the kernel's cache of always-allowed calls (built
// once, when a process is guarded) lets every other native call of the
// reaper and its programs through without running the filter; only the
// refused and served calls, ioctl (whose command it reads) and the
// network calls (socket, socketpair and the sends, whose arguments it
// reads), run it.
// The compat table is refused as a whole rather than call by call.
func metaFilter() []sockFilter {
	p := &bpfProg{labels: map[string]int{}}
	p.op(bpfLdAbsW, dataArch)
	p.jump(bpfJeqK, auditArchNative, "", "compat")
	p.op(bpfLdAbsW, dataNr)
	if x32Bit != 0 {
		p.jump(bpfJgeK, x32Bit, "enosys", "")
	}
	cases := map[uint32]string{sysSetxattrat: "enosys", sysRemovexattat: "enosys", sysFileSetattr: "eperm", sysIoctlNative: "ioctl",
		sysIoUringSetup: "enosys", sysIoUringEnter: "enosys", sysIoUringRegister: "enosys",
		sysClone3: "enosys"}
	for _, c := range nativeCalls {
		cases[c.nr] = "notify"
	}
	netCases(cases)
	p.search(ranges(cases), "allow")
	p.label("compat")
	p.jump(bpfJeqK, auditArchCompat, "enosys", "kill")
	p.label("ioctl")
	p.op(bpfLdAbsW, dataArg1L) // the command: the kernel takes its low 32 bits
	var rs []bpfRange
	for _, r := range ioctlAllowed {
		rs = append(rs, bpfRange{r[0], r[1], "allow"})
	}
	for _, cmd := range ioctlMetadata {
		rs = append(rs, bpfRange{cmd, cmd, "eperm"})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	p.search(rs, "enotty")
	netBlocks(p)
	p.label("allow")
	p.op(bpfRetK, retAllow)
	p.label("notify")
	p.op(bpfRetK, retUserNotif)
	p.label("enosys")
	p.op(bpfRetK, retErrno|uint32(syscall.ENOSYS))
	p.label("eperm")
	p.op(bpfRetK, retErrno|uint32(syscall.EPERM))
	p.label("enotty")
	p.op(bpfRetK, retErrno|uint32(syscall.ENOTTY))
	p.label("kill")
	p.op(bpfRetK, retKillProcess)
	netReturns(p)
	if !p.resolve() {
		panic("sandbox: metadata filter does not assemble") // a programming error, caught by every test
	}
	return p.ins
}

// metaProgram is metaFilter, assembled once: every guarded process
// installs the same program (the kernel copies it).
var metaProgram = sync.OnceValue(metaFilter)

// installMetaFilter installs the metadata filter (no_new_privs must be
// set on the calling thread) and returns its listener, close-on-exec:
// on the calling thread alone, or with allThreads on every thread of the
// process (which then all have no_new_privs; it fails, ESRCH, if a thread
// has a filter the caller lacks).
func installMetaFilter(allThreads bool) (int, error) {
	flags := uintptr(seccompFlagNewListener)
	if allThreads {
		flags |= seccompFlagTsync | seccompFlagTsyncESRCH
	}
	ins := metaProgram()
	var prog [16]byte // struct sock_fprog: u16 len, padding, pointer
	binary.NativeEndian.PutUint16(prog[0:], uint16(len(ins)))
	binary.NativeEndian.PutUint64(prog[8:], uint64(uintptr(unsafe.Pointer(&ins[0]))))
	fd, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, flags, uintptr(unsafe.Pointer(&prog[0])))
	runtime.KeepAlive(ins)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

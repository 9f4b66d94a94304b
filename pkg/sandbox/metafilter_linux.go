//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"runtime"
	"syscall"
	"unsafe"
)

// seccomp(2) and classic BPF, as the metadata filter uses them.
const (
	seccompSetModeFilter   = 1      // SECCOMP_SET_MODE_FILTER
	seccompFlagNewListener = 1 << 3 // SECCOMP_FILTER_FLAG_NEW_LISTENER

	retKillProcess = 0x80000000 // SECCOMP_RET_KILL_PROCESS
	retErrno       = 0x00050000 // SECCOMP_RET_ERRNO | errno
	retUserNotif   = 0x7fc00000 // SECCOMP_RET_USER_NOTIF
	retAllow       = 0x7fff0000 // SECCOMP_RET_ALLOW

	bpfLdAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
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

// The ioctls that change an inode's flags or its fsxattr (chattr): refused
// everywhere, they are metadata Landlock does not govern either.
const (
	fsIocSetflags   = 0x40086602 // FS_IOC_SETFLAGS
	fsIoc32Setflags = 0x40046602 // FS_IOC32_SETFLAGS
	fsIocFssetxattr = 0x401c5820 // FS_IOC_FSSETXATTR
)

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

// metaFilter is the filter: on the native architecture the calls of
// nativeCalls go to the guard (user notification), the unified-table
// extras and the inode-flag ioctls are refused, x32 is refused (amd64),
// everything else is allowed; on the compat architecture (i386 on amd64,
// arm on arm64) every metadata call is refused with EPERM; any other
// architecture kills the process.
func metaFilter() []sockFilter {
	p := &bpfProg{labels: map[string]int{}}
	p.op(bpfLdAbsW, dataArch)
	p.jump(bpfJeqK, auditArchNative, "", "compat")
	p.op(bpfLdAbsW, dataNr)
	if x32Bit != 0 {
		p.jump(bpfJgeK, x32Bit, "enosys", "")
	}
	for _, c := range nativeCalls() {
		p.jump(bpfJeqK, c.nr, "notify", "")
	}
	for _, nr := range []uint32{sysSetxattrat, sysRemovexattat} {
		p.jump(bpfJeqK, nr, "enosys", "")
	}
	p.jump(bpfJeqK, sysFileSetattr, "eperm", "")
	p.jump(bpfJeqK, sysIoctlNative, "ioctl", "allow")
	p.label("compat")
	p.jump(bpfJeqK, auditArchCompat, "", "kill")
	p.op(bpfLdAbsW, dataNr)
	for _, nr := range compatCalls() {
		p.jump(bpfJeqK, nr, "eperm", "")
	}
	p.jump(bpfJeqK, sysIoctlCompat, "ioctl", "allow")
	p.label("ioctl")
	p.op(bpfLdAbsW, dataArg1L)
	for _, cmd := range []uint32{fsIocSetflags, fsIoc32Setflags, fsIocFssetxattr} {
		p.jump(bpfJeqK, cmd, "eperm", "")
	}
	p.label("allow")
	p.op(bpfRetK, retAllow)
	p.label("notify")
	p.op(bpfRetK, retUserNotif)
	p.label("enosys")
	p.op(bpfRetK, retErrno|uint32(syscall.ENOSYS))
	p.label("eperm")
	p.op(bpfRetK, retErrno|uint32(syscall.EPERM))
	p.label("kill")
	p.op(bpfRetK, retKillProcess)
	if !p.resolve() {
		panic("sandbox: metadata filter does not assemble") // a programming error, caught by every test
	}
	return p.ins
}

// installMetaFilter installs the metadata filter on the calling thread
// (no_new_privs must be set) and returns its listener, close-on-exec.
func installMetaFilter() (int, error) {
	ins := metaFilter()
	var prog [16]byte // struct sock_fprog: u16 len, padding, pointer
	binary.NativeEndian.PutUint16(prog[0:], uint16(len(ins)))
	binary.NativeEndian.PutUint64(prog[8:], uint64(uintptr(unsafe.Pointer(&ins[0]))))
	fd, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, seccompFlagNewListener, uintptr(unsafe.Pointer(&prog[0])))
	runtime.KeepAlive(ins)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

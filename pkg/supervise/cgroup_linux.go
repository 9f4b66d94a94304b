package supervise

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC, statfs's f_type of a cgroup v2
// file system.
const cgroup2Magic = 0x63677270

// Containment timing: how long the processes of a killed cgroup have to
// be gone (SIGKILL cannot be ignored; only a process stuck in the kernel,
// on a hung file system say, takes longer), and how often emptiness is
// looked at meanwhile.
const (
	cgroupDrainLimit = 2 * time.Second
	cgroupPoll       = 5 * time.Millisecond
)

// invPrefix starts every invocation's cgroup: sbx-PID-START-N, PID and
// START the process that made it (its start time, in clock ticks since
// boot: /proc/<pid>/stat's field 22), N a counter of that process's. A
// pid alone could be a predecessor's: a Worker that is PID 1 of a
// container has the same pid after every restart. Cgroups do not outlive
// a boot, so pid and start time name one process.
const invPrefix = "sbx-"

// invMaker is the process named in an invocation cgroup's name: its pid
// and start time; old reports a name of the form before start times
// (sbx-PID-N), which this code never makes.
func invMaker(name string) (pid int, start uint64, old, ok bool) {
	rest, found := strings.CutPrefix(name, invPrefix)
	if !found {
		return 0, 0, false, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, false, false
	}
	for _, p := range parts {
		if p == "" || len(p) > 20 || strings.TrimLeft(p, "0123456789") != "" || len(p) > 1 && p[0] == '0' {
			return 0, 0, false, false
		}
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || pid > 1<<22 {
		return 0, 0, false, false
	}
	if len(parts) == 2 {
		return pid, 0, true, true
	}
	start, err = strconv.ParseUint(parts[1], 10, 64)
	return pid, start, false, err == nil
}

// selfStart is the calling process's start time (see invPrefix).
func selfStart() (uint64, bool) {
	st, ok := readProcStat(os.Getpid())
	return st.start, ok
}

// makerRuns reports whether the process an invocation cgroup is named
// after still runs: a process with that pid and that start time. An old
// name (no start time) counts as running when its pid runs, unless that
// pid is the caller's own: the caller never makes such a name, so it is
// a predecessor's that had the same pid.
func makerRuns(pid int, start uint64, old bool) bool {
	if old {
		if pid == os.Getpid() {
			return false
		}
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return err == nil
	}
	st, ok := readProcStat(pid)
	return ok && st.start == start
}

// Cgroups is a cgroup v2 subtree that contains sandboxed programs: each
// one a ReaperPool starts (ReaperPool.Contain) runs in a cgroup of its
// own below it, created for it, emptied with one write to its cgroup.kill
// when the program ends (the kernel kills every process in it, forks
// included), waited for until empty, and removed. It is safe for
// concurrent use.
type Cgroups struct {
	dir   string // for diagnostics only
	dirfd int    // the subtree's root (O_RDONLY|O_DIRECTORY)
	home  int    // the cgroup the caller and its reapers live in
	start uint64 // the caller's start time (see invPrefix)
	seq   atomic.Uint64
}

// OwnCgroup returns the directory of the calling process's cgroup v2, from
// /proc/self/cgroup and /proc/self/mountinfo (on a hybrid hierarchy the
// cgroup2 mount is not /sys/fs/cgroup).
func OwnCgroup() (string, error) {
	b, err := readBounded("/proc/self/cgroup", 64<<10)
	if err != nil {
		return "", cgroupError("cannot read /proc/self/cgroup", err)
	}
	cg, err := parseProcCgroup(b)
	if err != nil {
		return "", cgroupError("the process has no cgroup v2", nil)
	}
	mi, err := readBounded("/proc/self/mountinfo", 4<<20)
	if err != nil {
		return "", cgroupError("cannot read /proc/self/mountinfo", err)
	}
	dir, err := cgroupDir(mi, cg)
	if err != nil {
		return "", cgroupError("no cgroup v2 file system is mounted over the process's cgroup", nil)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != cgroup2Magic {
		return "", cgroupError("the process's cgroup directory is not on a cgroup v2 file system", err)
	}
	return dir, nil
}

// DelegatedCgroups makes the calling process's own cgroup v2 the subtree
// that contains its sandboxed programs. The cgroup must be writable by the
// caller's account (a service manager's delegated unit, a scope started
// for it, or a cgroup the operator created and chowned to the account).
// The caller moves itself into a leaf child; invocation cgroups that a
// predecessor which is no longer running left in it are emptied and
// removed first (each is named after the process that made it).
func DelegatedCgroups() (*Cgroups, error) {
	dir, err := OwnCgroup()
	if err != nil {
		return nil, err
	}
	leaf := dir + "/" + leafName
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, cgroupError("cannot create a cgroup below the process's own (not delegated to its account)", err)
	}
	if err := sweepLeftovers(dir); err != nil {
		return nil, err
	}
	if err := writeCgroupFile(leaf, "cgroup.procs", "0"); err != nil {
		return nil, cgroupError("cannot move the process within its cgroup (not delegated to its account)", err)
	}
	return NewCgroups(dir)
}

// sweepLeftovers empties and removes the invocation cgroups below dir
// whose maker (see invPrefix) no longer runs.
func sweepLeftovers(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return cgroupError("cannot list the cgroup", err)
	}
	for _, e := range entries {
		pid, start, old, ok := invMaker(e.Name())
		if !e.IsDir() || !ok || makerRuns(pid, start, old) {
			continue // not an invocation cgroup, or its maker's, running
		}
		fd, err := syscall.Open(dir+"/"+e.Name(), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		empty := drainCgroup(fd, cgroupDrainLimit)
		syscall.Close(fd)
		if !empty {
			return &CgroupError{Reason: "processes of an earlier invocation survive in the cgroup"}
		}
		syscall.Rmdir(dir + "/" + e.Name())
	}
	return nil
}

// NewCgroups returns dir, a cgroup v2 directory the caller may create
// cgroups in and move processes between (its own subtree, or one an
// administrator made for it), as the subtree for sandboxed programs. The
// caller's reapers stay in the caller's own cgroup, which must not be
// below dir's invocation cgroups. It checks that a cgroup can be created
// there and killed (cgroup.kill, Linux 5.14).
func NewCgroups(dir string) (*Cgroups, error) {
	own, err := OwnCgroup()
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, cgroupError("cannot open the cgroup", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &st); err != nil || st.Type != cgroup2Magic {
		syscall.Close(fd)
		return nil, cgroupError("not a cgroup v2 directory", err)
	}
	home, err := syscall.Open(own, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(fd)
		return nil, cgroupError("cannot open the process's own cgroup", err)
	}
	start, ok := selfStart()
	if !ok {
		syscall.Close(fd)
		syscall.Close(home)
		return nil, cgroupError("cannot read the process's start time", nil)
	}
	cg := &Cgroups{dir: dir, dirfd: fd, home: home, start: start}
	if err := cg.Probe(); err != nil {
		cg.Close()
		return nil, err
	}
	return cg, nil
}

// Probe creates a cgroup below the subtree, checks that it has
// cgroup.kill, and removes it.
func (cg *Cgroups) Probe() error {
	inv, err := cg.create()
	if err != nil {
		return err
	}
	defer inv.remove()
	kfd, err := openat(inv.fd, "cgroup.kill", syscall.O_WRONLY)
	if err != nil {
		return cgroupError("a cgroup below it has no cgroup.kill (Linux 5.14 or later is needed)", err)
	}
	syscall.Close(kfd)
	return nil
}

// Dir is the subtree's directory.
func (cg *Cgroups) Dir() string { return cg.dir }

// Controllers lists the controllers the subtree's cgroups could be given
// (its cgroup.controllers: "pids", "memory", ...; none on a hybrid host
// whose controllers are all on cgroup v1). No limit is set on a program's
// cgroup: a kill needs none.
func (cg *Cgroups) Controllers() []string {
	fd, err := openat(cg.dirfd, "cgroup.controllers", syscall.O_RDONLY)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var buf [1024]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n == len(buf) {
		return nil
	}
	return strings.Fields(string(buf[:n]))
}

// Close releases the subtree's descriptors.
func (cg *Cgroups) Close() {
	syscall.Close(cg.dirfd)
	syscall.Close(cg.home)
}

// invocation is one program's cgroup.
type invocation struct {
	cg   *Cgroups
	name string
	fd   int // O_RDONLY|O_DIRECTORY, close-on-exec
}

func (cg *Cgroups) create() (*invocation, error) {
	name := invPrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(cg.start, 10) + "-" + strconv.FormatUint(cg.seq.Add(1), 10)
	if err := syscall.Mkdirat(cg.dirfd, name, 0o755); err != nil {
		return nil, cgroupError("cannot create a cgroup for the program", err)
	}
	fd, err := openat(cg.dirfd, name, syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		unlinkDir(cg.dirfd, name)
		return nil, cgroupError("cannot open the program's cgroup", err)
	}
	return &invocation{cg: cg, name: name, fd: fd}, nil
}

// finish empties the cgroup (bounded by cgroupDrainLimit) and removes it;
// it reports false when processes survive, and the cgroup then stays.
func (inv *invocation) finish() bool {
	if !drainCgroup(inv.fd, cgroupDrainLimit) {
		inv.abandon()
		return false
	}
	inv.remove()
	return true
}

// abandon leaves the cgroup (it still holds processes) and closes it.
func (inv *invocation) abandon() { syscall.Close(inv.fd) }

func (inv *invocation) remove() {
	syscall.Close(inv.fd)
	unlinkDir(inv.cg.dirfd, inv.name)
}

func unlinkDir(dirfd int, name string) {
	for {
		if err := unlinkat(dirfd, name, atRemoveDir); err != syscall.EINTR {
			return
		}
	}
}

const atRemoveDir = 0x200

func unlinkat(dirfd int, name string, flags int) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := syscall.Syscall(syscall.SYS_UNLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags))
	if e != 0 {
		return e
	}
	return nil
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// drainCgroup kills every process of the cgroup open as fd (cgroup.kill:
// atomic against forks) and waits, at most limit, until none is left. It
// reports whether the cgroup is empty.
func drainCgroup(fd int, limit time.Duration) bool {
	ev, err := openat(fd, "cgroup.events", syscall.O_RDONLY)
	if err != nil {
		return false
	}
	defer syscall.Close(ev)
	if populated, err := readPopulated(ev); err == nil && !populated {
		return true
	}
	if writeAt(fd, "cgroup.kill", "1") != nil {
		return false
	}
	deadline := time.Now().Add(limit)
	for {
		populated, err := readPopulated(ev)
		if err != nil {
			return false
		}
		if !populated {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		// cgroup.events signals a change with POLLPRI; the poll is
		// short anyway, so a missed wake-up costs one interval.
		waitEvents(ev, min(left, cgroupPoll))
	}
}

func readPopulated(ev int) (bool, error) {
	var buf [4097]byte
	n, err := syscall.Pread(ev, buf[:], 0)
	if err != nil {
		return false, err
	}
	return parseCgroupEvents(buf[:n])
}

const pollPri = 0x2

func waitEvents(ev int, d time.Duration) {
	var pfd [8]byte // struct pollfd
	binary.NativeEndian.PutUint32(pfd[0:], uint32(ev))
	binary.NativeEndian.PutUint16(pfd[4:], pollPri)
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}

// openPidfd returns a pidfd for pid, or -1.
func openPidfd(pid int) int {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1
	}
	syscall.CloseOnExec(int(fd))
	return int(fd)
}

// pidfdExited reports whether the process of pidfd has exited (a pidfd
// polls readable from then on).
func pidfdExited(fd int) bool {
	var pfd [8]byte // struct pollfd
	binary.NativeEndian.PutUint32(pfd[0:], uint32(fd))
	binary.NativeEndian.PutUint16(pfd[4:], pollIn)
	var zero syscall.Timespec
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		if e != syscall.EINTR {
			return e != 0 || n == 1
		}
	}
}

// migrateSelf moves the calling process, every thread of it, into the
// cgroup open as fd.
func migrateSelf(fd int) error { return writeAt(fd, "cgroup.procs", "0") }

func writeAt(dirfd int, name, value string) error {
	fd, err := openat(dirfd, name, syscall.O_WRONLY)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	for {
		_, err = syscall.Write(fd, []byte(value))
		if err != syscall.EINTR {
			return err
		}
	}
}

func writeCgroupFile(dir, name, value string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return writeAt(fd, name, value)
}

// readBounded reads a whole file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errCgroupFormat
	}
	return b, nil
}

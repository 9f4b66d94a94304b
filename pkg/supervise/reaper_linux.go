package supervise

import (
	"encoding/binary"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

const (
	prSetChildSubreaper = 36  // PR_SET_CHILD_SUBREAPER
	sysPidfdSendSignal  = 424 // same number on every Linux architecture
	sysPidfdOpen        = 434
)

// reaperUsage is the reaper's exit status when it is started wrongly (no
// socket on fd 3, or the subreaper attribute cannot be set).
const reaperUsage = 125

// reaperFD is the reaper's end of its socket pair with supervise.
const reaperFD = 3

// Reaper timing. programKillGrace applies only when the reaper shuts down
// while a program runs (supervise went away); otherwise the caller's
// KillGrace escalates through a kill message.
const (
	programKillGrace = 300 * time.Millisecond // SIGTERM to SIGKILL of the program's group
	sweepTermGrace   = 100 * time.Millisecond // SIGTERM to SIGKILL of descendants
	sweepLimit       = 400 * time.Millisecond // bound on the whole sweep
	sweepPoll        = 2 * time.Millisecond
)

// ReaperMain is the reaper mode. It takes no arguments; it serves the
// socket supervise passed as fd 3 until supervise closes it (or dies), and
// returns the exit status for os.Exit. See the package documentation for
// what it does and how a binary dispatches to it.
func ReaperMain(args []string) int {
	if len(args) != 0 {
		return reaperUsage
	}
	var st syscall.Stat_t
	if syscall.Fstat(reaperFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return reaperUsage
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return reaperUsage
	}
	// The reaper sees every child's environment: no process of the same
	// account may read it out of /proc or attach to the reaper.
	if sandbox.ProtectSelf() != nil {
		return reaperUsage
	}
	// Through the runtime's poller (net.FileConn makes a non-blocking,
	// close-on-exec duplicate, and fd 3 is closed before any program
	// starts): a read that waits holds no OS thread, so each message costs
	// no thread hand-off.
	f := os.NewFile(reaperFD, "supervise")
	fc, err := net.FileConn(f)
	f.Close()
	conn, ok := fc.(*net.UnixConn)
	if err != nil || !ok {
		return reaperUsage
	}
	newReaperServer(conn).serve()
	return 0
}

// inbound is one message read from supervise.
type inbound struct {
	kind  byte
	spawn spawnRequest
	fds   [3]int
	// prog (-1 when absent) is the program's file, when it comes opened
	// (spawnRequest.program).
	prog int
	// cg, home and out (-1 when absent) come with a contained sandboxed
	// spawn: the program's own cgroup, the reaper's, and the read end of
	// the program's stdout (see start).
	cg, home, out int
}

func (m inbound) closeAll() {
	closeFDs(m.fds[:])
	if m.prog >= 0 {
		syscall.Close(m.prog)
	}
	closeFDs(m.extra())
}

// extra is the cgroup descriptors after the standard ones and the program.
func (m inbound) extra() []int {
	if m.cg < 0 {
		return nil
	}
	return []int{m.cg, m.home, m.out}
}

// reaperServer runs one program at a time for supervise. Everything that
// touches the current program happens on serve's goroutine, so a signal to
// the program's group is only ever sent while its leader is unreaped: the
// group id cannot have been recycled.
type reaperServer struct {
	conn *net.UnixConn
	// layers keeps the sandbox's shared read layer built between
	// programs; only the goroutine starting a program uses it, while
	// serve waits for it.
	layers sandbox.Cache
	// guarded: the reaper is under the metadata filter (sandbox.
	// GuardProcess), whose guard supervise serves; only a guarded reaper
	// starts sandboxed programs, and they inherit the filter.
	guarded bool
	sigs    chan os.Signal // termination signals: shut down
	chld    chan os.Signal // SIGCHLD while a sweep polls: wakes it early
	// cg is the running program's cgroup when it is contained, else -1;
	// out is then the read end of its stdout.
	cg, out int
}

func newReaperServer(conn *net.UnixConn) *reaperServer {
	s := &reaperServer{conn: conn, sigs: make(chan os.Signal, 4), chld: make(chan os.Signal, 1), cg: -1, out: -1}
	signal.Notify(s.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	return s
}

// serve handles messages until supervise closes the socket, sends
// something malformed, or a termination signal arrives; a program still
// running then gets SIGTERM, SIGKILL after programKillGrace, and is
// reaped and swept before serve returns.
func (s *reaperServer) serve() {
	in := make(chan inbound)
	go s.read(in)
	exited := make(chan struct{}, 1)
	pid := 0 // the running program, 0 when idle
	// pending is a contained spawn received, started once supervise says
	// go (msgGo): supervise has closed its copies of the program's pipe
	// ends by then, so a writer left on stdout when the program ends is
	// a process of the program's (see writerLeft).
	var pending *inbound
	closing := false
	var escalate <-chan time.Time
	shutdown := func() {
		closing, in = true, nil
		if pending != nil {
			pending.closeAll()
			pending = nil
		}
		if pid == 0 {
			return
		}
		syscall.Kill(-pid, syscall.SIGTERM)
		syscall.Kill(-pid, syscall.SIGCONT)
		t := time.NewTimer(programKillGrace)
		escalate = t.C
	}
	for {
		if closing && pid == 0 {
			return
		}
		select {
		case m, ok := <-in:
			switch {
			case !ok:
				shutdown()
			case m.kind == msgSpawn && pid == 0 && pending == nil && m.cg >= 0:
				pending = &m
			case m.kind == msgGo && pending != nil:
				pid = s.start(*pending, exited)
				pending = nil
			case m.kind == msgSpawn && pid == 0 && pending == nil:
				pid = s.start(m, exited)
			case m.kind == msgSpawn:
				m.closeAll() // one program at a time: a broken caller
				shutdown()
			case m.kind == msgGo:
				shutdown() // go only for a contained spawn: a broken caller
			case m.kind == msgGuard && pid == 0 && !s.guarded:
				s.guard()
			case m.kind == msgGuard:
				shutdown() // once, and only while idle: a broken caller
			case m.kind == msgTerminate && pid > 0:
				syscall.Kill(-pid, syscall.SIGTERM)
				syscall.Kill(-pid, syscall.SIGCONT)
			case m.kind == msgKill && pid > 0:
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		case <-s.sigs:
			shutdown()
		case <-escalate:
			syscall.Kill(-pid, syscall.SIGKILL)
			escalate = nil
		case <-exited:
			// For a contained program: does something it started still
			// hold its stdout, now that it has ended? What is left of the
			// group goes first, then the leader is reaped, then every
			// other descendant is killed (the cgroup) or swept.
			var rep sweepReport
			if s.cg >= 0 {
				rep.contained, rep.held = true, writerLeft(s.out)
				syscall.Close(s.out)
				s.out = -1
			}
			syscall.Kill(-pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if err != syscall.EINTR {
					break
				}
			}
			pid, escalate = 0, nil
			if s.cg >= 0 {
				rep.survivors = !drainCgroup(s.cg, cgroupDrainLimit)
				syscall.Close(s.cg)
				s.cg = -1
				// Their zombies, reparented here.
				reapAvailable(time.Now().Add(sweepLimit))
			} else {
				rep = s.sweep()
			}
			if !closing {
				r := reply{kind: msgExited, code: ws.ExitStatus(), timedOut: rep.timedOut,
					fast: rep.fast, term: rep.term, kill: rep.kill,
					contained: rep.contained, held: rep.held, survivors: rep.survivors}
				if ws.Signaled() {
					r.code, r.signal = -1, int(ws.Signal())
				}
				s.send(r)
			}
		}
	}
}

// start starts the program, answers with its pid or the errno of the
// failed start, and arranges for exited to be told when it ends. It
// returns the pid, 0 when the start failed.
func (s *reaperServer) start(m inbound, exited chan<- struct{}) int {
	var st started
	switch {
	case m.spawn.sandbox != nil && !s.guarded:
		st.err, st.step = syscall.EPERM, stepSandbox // its metadata calls would be ungoverned
		if m.prog >= 0 {
			syscall.Close(m.prog)
		}
	case m.cg >= 0:
		st = s.startContained(m, exited)
	case m.spawn.sandbox != nil:
		st = startSandboxed(m, &s.layers, exited)
	default:
		st = forkExec(m, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})
		if st.err == nil {
			go awaitExit(st.pid, st.pidfd, exited)
		}
	}
	closeFDs(m.fds[:]) // the program's file, if any, is closed by now
	if m.cg >= 0 {
		syscall.Close(m.home)
		if st.err == nil {
			s.cg, s.out = m.cg, m.out // emptied and closed once the program has ended
		} else {
			syscall.Close(m.cg)
			syscall.Close(m.out)
		}
	}
	if st.err != nil {
		r := failed(st.err)
		r.step = st.step
		s.send(r)
		return 0
	}
	s.send(reply{kind: msgStarted, pid: st.pid})
	return st.pid
}

// writerLeft reports whether the pipe whose read end is out still has a
// writer (poll reports POLLHUP once the last one is closed, data or not).
func writerLeft(out int) bool {
	var pfd [8]byte // struct pollfd
	binary.NativeEndian.PutUint32(pfd[0:], uint32(out))
	binary.NativeEndian.PutUint16(pfd[4:], pollIn)
	var zero syscall.Timespec
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return e != 0 || n != 1 || binary.NativeEndian.Uint16(pfd[6:])&pollHup == 0
	}
}

const (
	pollIn  = 0x1
	pollHup = 0x10
)

// startContained starts a sandboxed program inside its own cgroup (m.cg):
// the reaper moves itself, every thread, into that cgroup, forks the
// program there (so it never runs outside it, and neither does anything
// it starts), and moves itself back to its own cgroup (m.home). The
// reaper runs one program at a time, so nothing else it starts can land
// in the program's cgroup meanwhile. (clone3's CLONE_INTO_CGROUP would
// spare the two moves, but the metadata filter refuses clone3 to every
// process under it, this reaper included: see sandbox's metaFilter.)
func (s *reaperServer) startContained(m inbound, exited chan<- struct{}) started {
	if err := migrateSelf(m.cg); err != nil {
		if m.prog >= 0 {
			syscall.Close(m.prog)
		}
		return started{err: err, step: stepCgroup}
	}
	st := startSandboxed(m, &s.layers, exited)
	if err := migrateSelf(m.home); err != nil {
		// Still in the program's cgroup, the reaper would kill itself
		// with the program: it stops here instead, and the program dies
		// with the thread that started it (its parent-death signal).
		// supervise then finds the reaper gone and empties the cgroup.
		os.Exit(reaperUsage)
	}
	return st
}

// guard puts the reaper, every thread of it, under the metadata filter
// and sends supervise the filter's listener, keeping no copy: supervise
// serves it (a filtered process cannot serve its own filter), armed with
// each sandboxed program's policy while that program runs. The reaper
// itself makes no metadata call. Every sandboxed program then inherits
// the filter from the thread that starts it, at no cost per start.
func (s *reaperServer) guard() {
	fd, err := sandbox.GuardProcess()
	if err != nil {
		s.send(failed(err))
		return
	}
	s.guarded = true
	s.conn.WriteMsgUnix([]byte{msgGuarded}, syscall.UnixRights(fd), nil)
	syscall.Close(fd)
}

// failed is the answer to a start or guard request that failed with err:
// its errno, EINVAL when it has none a reply can carry.
func failed(err error) reply {
	errno, ok := err.(syscall.Errno)
	if !ok || errno == 0 || errno > 4095 {
		errno = syscall.EINVAL
	}
	return reply{kind: msgFailed, errno: int(errno)}
}

// started is the outcome of one fork and exec: the pid and a pidfd for it
// (-1 when the kernel has none), or the error.
type started struct {
	pid, pidfd int
	err        error
	step       byte // with err: the step that failed
}

// forkExec starts the program of m with sys. The program dies with the
// thread that started it (Pdeathsig): a reaper that is killed cannot
// sweep, but its direct child at least does not stay.
func forkExec(m inbound, sys *syscall.SysProcAttr) started {
	st := started{pidfd: -1}
	sys.PidFD = &st.pidfd
	st.pid, st.err = syscall.ForkExec(m.spawn.path, m.spawn.argv, &syscall.ProcAttr{
		Dir:   m.spawn.dir,
		Env:   m.spawn.env,
		Files: []uintptr{uintptr(m.fds[0]), uintptr(m.fds[1]), uintptr(m.fds[2])},
		Sys:   sys,
	})
	return st
}

// startSandboxed starts the program of m inside its Landlock policy,
// which reads and executes the program's file as opened here
// (sandbox.OpenProgram) or as it came (m.prog, which it closes), not its
// name. A
// Landlock domain (and no_new_privs) binds a thread for good, so a
// goroutine locks itself to a fresh OS thread, restricts that thread,
// starts the program from it and then waits there for the program's exit:
// the thread must outlive the program, whose parent-death signal follows
// the thread that forked it. The goroutine then ends still locked, and the
// Go runtime discards the thread with it; it never runs anything else, and
// the runtime never clones a locked thread for new ones.
// The thread, like every thread of a guarded reaper, is under the
// metadata filter, which the program inherits.
func startSandboxed(m inbound, layers *sandbox.Cache, exited chan<- struct{}) started {
	res := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		// The program is opened once (here, or by supervise's caller
		// when it came as a descriptor): the domain's rule for it is on
		// that file, and it is executed through it.
		var prog *sandbox.Program
		var err error
		if m.prog >= 0 {
			prog, err = sandbox.AdoptProgram(m.prog, m.spawn.path)
		} else {
			prog, err = sandbox.OpenProgram(m.spawn.path)
		}
		if err != nil {
			res <- started{err: err, step: stepProgram}
			return
		}
		policy := *m.spawn.sandbox
		policy.Program = prog
		if _, err := sandbox.RestrictThread(&policy, layers); err != nil {
			prog.Close()
			res <- started{err: err, step: stepSandbox}
			return
		}
		m.spawn.path = prog.ExecPath()
		st := forkExec(m, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})
		prog.Close()
		res <- st
		if st.err == nil {
			// The thread is this program's alone: it waits in the kernel
			// (waitid, unreaped), which wakes it directly, rather than
			// through the poller, whose wake-up would have to hand the
			// goroutine back to this one locked thread.
			if st.pidfd >= 0 {
				syscall.Close(st.pidfd)
			}
			awaitExitNoReap(st.pid)
			exited <- struct{}{}
		}
	}()
	return <-res
}

// send writes one message; a failed send shows up as EOF on the next read.
func (s *reaperServer) send(r reply) {
	s.conn.Write(r.encode())
}

// read delivers well-formed messages to in and closes it at EOF, on a read
// error, or at the first malformed message.
func (s *reaperServer) read(in chan<- inbound) {
	defer close(in)
	buf := make([]byte, maxReaperMsg+1)
	oob := make([]byte, syscall.CmsgSpace(8*4)) // room for one fd too many
	var held *sandbox.Shared                    // the last Shared supervise sent
	for {
		// Received descriptors are close-on-exec (the runtime asks for
		// MSG_CMSG_CLOEXEC).
		n, oobn, flags, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			closeFDs(receivedFDs(oob[:oobn]))
			return
		}
		fds := receivedFDs(oob[:oobn])
		m, ok := parseInbound(buf[:n], fds, flags, held)
		if !ok {
			closeFDs(fds)
			return
		}
		if m.spawn.sandbox != nil {
			held = m.spawn.sandbox.Shared
		}
		in <- m
	}
}

// parseInbound checks one datagram and the descriptors that came with it:
// a spawn carries exactly three, nothing else carries any. held is the
// sandbox.Shared the reaper holds (see spawnRequest.encode).
func parseInbound(b []byte, fds []int, flags int, held *sandbox.Shared) (inbound, bool) {
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 || len(b) == 0 {
		return inbound{}, false
	}
	switch b[0] {
	case msgSpawn:
		// Three descriptors, one more for a program that comes opened,
		// three more for a contained sandboxed program.
		req, err := decodeSpawn(b, held)
		if err != nil {
			return inbound{}, false
		}
		n := 3
		if req.program {
			n++
		}
		if len(fds) != n && !(len(fds) == n+3 && req.sandbox != nil) {
			return inbound{}, false
		}
		m := inbound{kind: msgSpawn, spawn: req, fds: [3]int{fds[0], fds[1], fds[2]}, prog: -1, cg: -1, home: -1, out: -1}
		if req.program {
			m.prog = fds[3]
		}
		if len(fds) == n+3 {
			m.cg, m.home, m.out = fds[n], fds[n+1], fds[n+2]
		}
		return m, true
	case msgTerminate, msgKill, msgGuard, msgGo:
		if len(b) != 1 || len(fds) != 0 {
			return inbound{}, false
		}
		return inbound{kind: b[0], prog: -1, cg: -1, home: -1, out: -1}, true
	}
	return inbound{}, false
}

func receivedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// awaitExit reports on exited once process pid has exited, leaving it
// unreaped. With a pidfd it waits through the runtime's poller (a pidfd
// becomes readable when its process exits), so the wait holds no OS
// thread; without one it blocks a thread in waitid.
func awaitExit(pid, pidfd int, exited chan<- struct{}) {
	defer func() { exited <- struct{}{} }()
	if pidfd < 0 || syscall.SetNonblock(pidfd, true) != nil {
		if pidfd >= 0 {
			syscall.Close(pidfd)
		}
		awaitExitNoReap(pid)
		return
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Read(func(uintptr) bool { return exitedNoReap(pid) })
	}
	if err != nil {
		awaitExitNoReap(pid)
	}
}

// reapAvailable reaps every exited child without blocking and reports
// whether any child remains. With no child left there can be no
// descendant: each descendant either has a living ancestor below the
// reaper or has been reparented to it. It stops at deadline (children
// that keep exiting faster than it reaps) and then reports that children
// remain.
func reapAvailable(deadline time.Time) bool {
	for n := 0; ; n++ {
		if n%64 == 63 && time.Now().After(deadline) {
			return true
		}
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return false // ECHILD
		case got == 0:
			return true
		}
	}
}

// sweep terminates and reaps every remaining descendant, bounded by
// sweepLimit: SIGTERM and SIGCONT first, SIGKILL after sweepTermGrace.
//
// The fast path, by far the common case, costs one wait4 call: when no
// child is left there is no descendant at all, and the sweep ends at once
// without scanning /proc, signalling or waiting.
func (s *reaperServer) sweep() sweepReport {
	start := time.Now()
	if !reapAvailable(start.Add(sweepLimit)) {
		return sweepReport{fast: true}
	}
	// SIGCHLD only wakes the poll below early; one that came before this
	// registration needs no wake-up, reapAvailable runs first anyway.
	signal.Notify(s.chld, syscall.SIGCHLD)
	defer func() {
		signal.Stop(s.chld)
		select {
		case <-s.chld:
		default:
		}
	}()
	var rep sweepReport
	self := os.Getpid()
	tree := newProcTree()
	sent := map[proc]syscall.Signal{}
	for reapAvailable(start.Add(sweepLimit)) {
		elapsed := time.Since(start)
		if elapsed >= sweepLimit {
			rep.timedOut = true
			return rep
		}
		sig := syscall.SIGTERM
		if elapsed >= sweepTermGrace {
			sig = syscall.SIGKILL
		}
		for _, d := range tree.descendants(self) {
			if prev, ok := sent[d]; ok && (prev == syscall.SIGKILL || sig == syscall.SIGTERM) {
				continue
			}
			if !signalIdentified(d, sig) {
				continue
			}
			if sig == syscall.SIGTERM {
				signalIdentified(d, syscall.SIGCONT)
				rep.term++
			} else {
				rep.kill++
			}
			sent[d] = sig
		}
		t := time.NewTimer(sweepPoll)
		select {
		case <-s.chld:
		case <-t.C:
		}
		t.Stop()
	}
	return rep
}

// signalIdentified signals d only while it is still the process that was
// found: it opens a pidfd for the pid, then confirms the start time, so
// the signal cannot reach a process that recycled the pid. It reports
// whether the signal was sent.
func signalIdentified(d proc, sig syscall.Signal) bool {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(d.pid), 0, 0)
	if e == syscall.ENOSYS {
		if cur, ok := readProcStat(d.pid); ok && cur.start == d.start {
			return syscall.Kill(d.pid, sig) == nil // no pidfd on this kernel: best effort
		}
		return false
	}
	if e != 0 {
		return false // already gone
	}
	defer syscall.Close(int(fd))
	if cur, ok := readProcStat(d.pid); !ok || cur.start != d.start {
		return false
	}
	_, _, e = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0)
	return e == 0
}

package supervise

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

const (
	prSetChildSubreaper = 36  // PR_SET_CHILD_SUBREAPER
	sysPidfdSendSignal  = 424 // same number on every Linux architecture
	sysPidfdOpen        = 434
)

// Reaper exit statuses of its own (the program's status is passed through).
const (
	reaperUsage       = 125 // bad arguments or the subreaper could not be set
	reaperStartFailed = 127 // the program could not be started
)

// Reaper timing. The total stays well under DefaultKillGrace, so supervise
// never has to SIGKILL a reaper that is still cleaning up.
const (
	programKillGrace = 300 * time.Millisecond // forwarded signal to SIGKILL of the program
	sweepTermGrace   = 100 * time.Millisecond // SIGTERM to SIGKILL of descendants
	sweepLimit       = 400 * time.Millisecond // bound on the whole sweep
	sweepPoll        = 2 * time.Millisecond
)

// ReaperMain is the reaper mode: args are the program's path followed by
// its arguments. It returns the exit status for os.Exit. See the package
// documentation for what it does and how a binary dispatches to it.
func ReaperMain(args []string) int {
	status, _ := reap(args)
	return status
}

// sweepReport says what the cleanup after the program did: nothing at all
// (fast: no child was left once the program had been reaped), or how many
// signals it sent and whether the bound cut it short.
type sweepReport struct {
	fast       bool
	term, kill int
	timedOut   bool
}

// reap is ReaperMain with the sweep's report, which tests inspect.
func reap(args []string) (int, sweepReport) {
	reportFD := -1
	if len(args) > 0 && args[0] == reaperExecFDFlag {
		// fd 3 reports a failed exec to supervise; the program must not
		// inherit it.
		reportFD, args = 3, args[1:]
		syscall.CloseOnExec(reportFD)
	}
	env := os.Environ() // exactly what supervise passed to the reaper, but:
	if len(args) > 0 && args[0] == reaperEnvFlag {
		// the last entry was for this process's runtime only
		if len(env) == 0 || env[len(env)-1] != reaperRuntimeEnv {
			return reaperUsage, sweepReport{}
		}
		env, args = env[:len(env)-1], args[1:]
	}
	if len(args) == 0 || args[0] == "" {
		return reaperUsage, sweepReport{}
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return reaperUsage, sweepReport{}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)

	pidfd := -1
	pid, err := syscall.ForkExec(args[0], args, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{PidFD: &pidfd},
	})
	if err != nil {
		if reportFD >= 0 {
			syscall.Write(reportFD, []byte{1})
		}
		return reaperStartFailed, sweepReport{}
	}
	prog := program{pid: pid, pidfd: pidfd}
	stop := make(chan struct{})
	go prog.forward(sigs, stop)
	ws, ok := waitProgram(pid)
	close(stop)
	rep := sweep()
	switch {
	case !ok:
		return reaperUsage, rep
	case ws.Exited():
		return ws.ExitStatus(), rep
	case ws.Signaled():
		return 128 + int(ws.Signal()), rep
	}
	return reaperUsage, rep
}

// program is the reaper's direct child. Its pidfd (from clone) can never
// name a recycled process; without pidfd support the plain pid is used.
type program struct {
	pid, pidfd int
}

func (p program) signal(sig syscall.Signal) {
	if p.pidfd >= 0 {
		syscall.Syscall6(sysPidfdSendSignal, uintptr(p.pidfd), uintptr(sig), 0, 0, 0, 0)
		return
	}
	syscall.Kill(p.pid, sig)
}

// forward passes termination signals to the program and escalates to
// SIGKILL when it has not exited programKillGrace after the first one.
func (p program) forward(sigs <-chan os.Signal, stop <-chan struct{}) {
	var escalate <-chan time.Time
	for {
		select {
		case s := <-sigs:
			if sig, ok := s.(syscall.Signal); ok {
				p.signal(sig)
			}
			if escalate == nil {
				t := time.NewTimer(programKillGrace)
				defer t.Stop()
				escalate = t.C
			}
		case <-escalate:
			p.signal(syscall.SIGKILL)
		case <-stop:
			return
		}
	}
}

// waitProgram reaps children until the program itself has exited.
// Orphans reparented to the reaper meanwhile are reaped as they exit.
func waitProgram(pid int) (syscall.WaitStatus, bool) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ws, false
		}
		if got == pid {
			return ws, true
		}
	}
}

// reapAvailable reaps every exited child without blocking and reports
// whether any child remains. With no child left there can be no
// descendant: each descendant either has a living ancestor below the
// reaper or has been reparented to it.
func reapAvailable() bool {
	for {
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
// child is left there is no descendant at all, and the reaper exits at
// once without scanning /proc, registering for SIGCHLD or waiting.
func sweep() sweepReport {
	if !reapAvailable() {
		return sweepReport{fast: true}
	}
	// SIGCHLD only wakes the poll below early; one that arrived before
	// this registration needs no wake-up, reapAvailable runs first anyway.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	var rep sweepReport
	self := os.Getpid()
	tree := newProcTree()
	start := time.Now()
	sent := map[proc]syscall.Signal{}
	for reapAvailable() {
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
		case <-chld:
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

package supervise

import "syscall"

// procAttr is the SysProcAttr of a started child. A reaper also gets
// SIGTERM as its parent-death signal: when the calling process dies (even
// by SIGKILL, when nothing else could stop the child), the reaper stops the
// program as on any forwarded SIGTERM and then sweeps its descendants, so a
// crashed caller leaves no plugin process behind. The runtime closes the
// race with a parent that dies before the signal is armed.
//
// Linux sends the signal when the OS thread that forked the reaper ends.
// The Go runtime ends a thread only when a goroutine exits while locked to
// it (runtime.LockOSThread), so Start must not be called from such a
// goroutine; nothing in this module locks threads.
func procAttr(wrapped bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if wrapped {
		a.Pdeathsig = syscall.SIGTERM
	}
	return a
}

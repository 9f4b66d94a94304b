package conformance

import (
	"syscall"
	"unsafe"
)

// waitExit blocks until process pid has exited without reaping it
// (waitid with WNOWAIT), so its process group id stays reserved until the
// caller has signalled the group. It reports whether it observed the exit.
func waitExit(pid int) bool {
	const (
		pPID    = 1         // P_PID
		wNoWait = 0x1000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

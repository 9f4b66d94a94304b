package supervise

import (
	"syscall"
	"unsafe"
)

// reaperSupported reports whether Command.Reaper is honoured here.
const reaperSupported = true

const (
	pPID    = 1          // P_PID
	wExited = 0x4        // WEXITED
	wNoWait = 0x01000000 // WNOWAIT
)

// awaitExitNoReap blocks until process pid has exited, leaving it
// unreaped, and reports whether that worked.
func awaitExitNoReap(pid int) bool {
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch e {
		case 0:
			return true
		case syscall.EINTR:
			continue
		default:
			return false
		}
	}
}

// wNoHang is WNOHANG.
const wNoHang = 0x1

// exitedNoReap reports whether process pid has exited, without waiting
// and leaving it unreaped. An error (no such child) counts as exited.
func exitedNoReap(pid int) bool {
	var info [128]byte // siginfo_t, zeroed: the kernel fills it only for a match
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait|wNoHang, 0, 0)
		switch e {
		case 0:
			// si_signo, the first field on every architecture, is SIGCHLD
			// for a match and stays 0 when pid is still running.
			return *(*int32)(unsafe.Pointer(&info[0])) != 0
		case syscall.EINTR:
			continue
		default:
			return true
		}
	}
}

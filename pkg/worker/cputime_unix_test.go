//go:build unix

package worker

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) of this process and of every
// child it has reaped, which includes what those children reaped: plugin
// processes and their wrappers.
func processCPU() time.Duration {
	return rusageCPU(syscall.RUSAGE_SELF) + rusageCPU(syscall.RUSAGE_CHILDREN)
}

// rusageCPU is user + system time from getrusage(who), 0 if unavailable.
func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

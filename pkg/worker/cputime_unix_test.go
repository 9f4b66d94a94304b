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
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return 0
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

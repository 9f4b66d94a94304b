package supervise

import "fmt"

// SweepOf describes what the reaper's sweep did after p's child was
// reaped: "fast=… term=… kill=… timedout=…".
func SweepOf(p *Process) string {
	<-p.done
	r := p.sweep
	return fmt.Sprintf("fast=%t term=%d kill=%d timedout=%t", r.fast, r.term, r.kill, r.timedOut)
}

// IdleReapers is how many reapers wait in pl for their next child.
func IdleReapers(pl *ReaperPool) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.idle[0]) + len(pl.idle[1])
}

// IdleGuarded is how many of them are guarded.
func IdleGuarded(pl *ReaperPool) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.idle[1])
}

// ReaperPid is the pid of the reaper running p's child.
func ReaperPid(p *Process) int { return p.rc.cmd.Process.Pid }

// SweepLeftovers is sweepLeftovers: the leftover sweep a Worker makes at
// startup, run in the test's own process.
func SweepLeftovers(dir string) error { return sweepLeftovers(dir) }

// SelfStart is the process's start time, as invocation cgroups name it.
func SelfStart() uint64 {
	s, _ := selfStart()
	return s
}

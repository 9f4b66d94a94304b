package supervise

import (
	"os"
	"sync"
	"time"
)

// reaperUnresponsive is how long a reaper has, after a kill message, to
// report its child's end (its sweep alone takes up to sweepLimit) before
// supervise kills the reaper itself.
const reaperUnresponsive = time.Second

// ReaperPool starts and keeps long-lived reaper processes of one binary
// (a binary that dispatches ReaperArg to ReaperMain, see the package
// documentation). Each reaper runs one child at a time; a Start that names
// the pool takes an idle reaper or starts a new one, and the reaper goes
// back to the pool once its child has been reaped and swept. The pool
// therefore grows to the largest number of children run at once. It is
// safe for concurrent use. On systems without reaper support it is inert.
//
// Sandboxed programs start from guarded reapers only: a reaper under the
// metadata filter (sandbox.GuardProcess) whose guard the pool serves in
// the caller's process, armed with each program's policy while it runs.
// The pool keeps them apart from the reapers that start trusted programs.
type ReaperPool struct {
	exe string

	mu     sync.Mutex
	idle   [2][]*reaperConn // [1]: guarded
	closed bool
	// cgroups, when set, contains every sandboxed program (Contain).
	cgroups *Cgroups
}

// NewReaperPool returns a pool of reapers started from exe (usually the
// path Self returns). No process starts before the first Start that uses
// it.
func NewReaperPool(exe string) *ReaperPool {
	return &ReaperPool{exe: exe}
}

// Contain makes every sandboxed program the pool starts from now on run
// in a cgroup of its own below cg, which is emptied by the kernel (every
// process in it killed at once, forks included) when the program ends,
// before Wait returns. Without it a sandboxed program's descendants are
// swept as any other program's, which a hostile program can outrun.
// Call it before the first Start.
func (pl *ReaperPool) Contain(cg *Cgroups) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.cgroups = cg
}

func (pl *ReaperPool) containment() *Cgroups {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.cgroups
}

// Close stops the idle reapers and waits for them to exit; reapers still
// running a child stop once that child is done. Start fails for a child
// that names a closed pool.
func (pl *ReaperPool) Close() {
	pl.mu.Lock()
	idle := append(pl.idle[0], pl.idle[1]...)
	pl.idle, pl.closed = [2][]*reaperConn{}, true
	pl.mu.Unlock()
	for _, rc := range idle {
		rc.stop()
	}
}

// take returns an idle reaper, guarded or not, or nil when there is none;
// false means the pool is closed.
func (pl *ReaperPool) take(guarded bool) (*reaperConn, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		return nil, false
	}
	idle := &pl.idle[kindOf(guarded)]
	if n := len(*idle); n > 0 {
		rc := (*idle)[n-1]
		*idle = (*idle)[:n-1]
		return rc, true
	}
	return nil, true
}

func kindOf(guarded bool) int {
	if guarded {
		return 1
	}
	return 0
}

// put returns a reaper that is idle and healthy to the pool.
func (pl *ReaperPool) put(rc *reaperConn) {
	pl.mu.Lock()
	if !pl.closed {
		k := kindOf(rc.guarded())
		pl.idle[k] = append(pl.idle[k], rc)
		rc = nil
	}
	pl.mu.Unlock()
	if rc != nil {
		rc.stop()
	}
}

// sweepReport says what the cleanup after a program did: nothing at all
// (fast: no child was left once the program had been reaped), or how many
// signals it sent and whether the bound cut it short. A contained
// program's cleanup is its cgroup's kill instead: held says that a
// process it started still held its stdout when it ended (it was
// killed), survivors that processes were still there when the wait for
// them ran out.
type sweepReport struct {
	fast       bool
	term, kill int
	timedOut   bool

	contained, held, survivors bool
}

// Self returns the path a binary passes to NewReaperPool to start reapers
// from itself. On Linux that is /proc/self/exe, which names the running
// binary even after an upgrade replaced or removed its file, so a reaper
// always speaks its caller's version of the private messages; elsewhere it
// is os.Executable.
func Self() (string, error) {
	if reaperSupported {
		if _, err := os.Stat(procSelfExe); err == nil {
			return procSelfExe, nil
		}
	}
	return os.Executable()
}

const procSelfExe = "/proc/self/exe"

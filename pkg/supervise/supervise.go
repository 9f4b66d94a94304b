package supervise

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// ReaperArg is the reserved first argument that switches a binary that
// supports it into reaper mode (see ReaperMain and the package doc).
const ReaperArg = "__forge_reaper"

// Defaults used when the corresponding Command field is zero.
const (
	DefaultKillGrace   = time.Second
	DefaultStderrBytes = 4096
)

// Command describes one child process. The zero values of Reaper, Timeout,
// KillGrace and StderrBytes select no reaper, no timeout and the defaults.
type Command struct {
	// Path is the executable. A relative path is resolved against the
	// caller's working directory (not Dir) before the child starts.
	Path string
	// Args are the arguments after the program name; argv[0] is Path.
	Args []string
	// Env is the child's complete environment; nothing is inherited.
	Env []string
	// Dir is the child's working directory; empty means the caller's.
	Dir string
	// Reaper, when set on Linux, runs the child under one of the pool's
	// subreaper wrappers (see ReaperPool). Ignored on other systems.
	Reaper *ReaperPool
	// Sandbox, when set, is the Landlock policy the child starts in (see
	// pkg/sandbox), under the metadata guard (see ReaperPool); it needs
	// no rule for Path: the reaper opens Path once and the domain reads
	// and executes that file (sandbox.Policy.Program). It needs
	// Reaper on Linux: without one, or on other systems, Start fails
	// rather than run the child unconfined.
	Sandbox *sandbox.Policy
	// Program, when set, is the program's file, already opened by the
	// caller (O_PATH is enough: sandbox.OpenBeneath), for a name that
	// whoever the sandbox confines could shape (a check's program in the
	// workspace): the reaper then executes that file and puts the
	// domain's rule on it, and Path is only its name (argv[0], and the
	// name a script's interpreter reads). Only with Sandbox. The caller
	// keeps it and may close it once Start returns.
	Program *os.File
	// OutputLimit is the combined budget, in bytes, for everything the child
	// writes to stdout and stderr. It must be positive.
	OutputLimit int64
	// StderrBytes is how much of stderr is kept privately (the first bytes).
	StderrBytes int
	// Timeout stops the child when it elapses; zero means none.
	Timeout time.Duration
	// KillGrace is the delay between SIGTERM and SIGKILL to the group, and
	// the bound on draining stderr after the child exits.
	KillGrace time.Duration
}

// Errors reported by Wait and Run for why supervise stopped a child.
var (
	ErrOutputLimit = errors.New("child output exceeded its budget")
	ErrTimeout     = errors.New("child timed out")
	// ErrSurvivors: a contained program's cgroup still held processes
	// when the wait for them ran out, after its kill; they may still act
	// on whatever the program could reach. It wins over every other
	// reason.
	ErrSurvivors = errors.New("processes of the child survived its cgroup's kill")
)

// StartError reports that a child could not be started. Its message holds
// only a fixed reason and, when known, the system error number's text.
type StartError struct {
	Reason string
	Err    error // a syscall.Errno when the system refused, else nil
}

func (e *StartError) Error() string {
	if e.Err != nil {
		return "start child process: " + e.Reason + ": " + e.Err.Error()
	}
	return "start child process: " + e.Reason
}

func (e *StartError) Unwrap() error { return e.Err }

// startError keeps only the errno of err, never its path or argv.
func startError(reason string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &StartError{Reason: reason, Err: errno}
	}
	return &StartError{Reason: reason}
}

// Exit is how a child ended.
type Exit struct {
	Code   int            // exit code, or -1 when a signal ended the child
	Signal syscall.Signal // the signal that ended the child, or 0
}

// Success reports a zero exit code.
func (e Exit) Success() bool { return e.Code == 0 && e.Signal == 0 }

// Process is a started child. Its stdin and stdout are pipes owned by the
// caller; stderr is collected privately. Call Wait, then Close.
type Process struct {
	cmd       *exec.Cmd   // the child, when it runs without a reaper
	rc        *reaperConn // the reaper running the child, when wrapped
	pool      *ReaperPool // where rc goes back to
	pid       int
	killGrace time.Duration

	stdin   *os.File
	stdoutR *os.File
	stdout  *meteredReader
	stderrR *os.File
	stderr  *headBuffer
	budget  *budget

	stderrDone chan struct{}
	done       chan struct{} // closed once the child is reaped and stderr drained

	mu        sync.Mutex
	reaped    bool
	termSent  bool
	killTimer *time.Timer
	// reaperTimer kills an unresponsive reaper (see Kill).
	reaperTimer *time.Timer
	reason      error
	exit        Exit
	sweep       sweepReport // what the reaper's sweep did (wrapped only)
	inv         *invocation // the child's cgroup, when contained
	// pidfd is a contained child's pidfd until it is reaped (else -1):
	// Ended reads it.
	pidfd     int
	closeOnce sync.Once
	disarm    func() // cancels watch's callbacks
}

// Start starts c. The child is stopped (SIGTERM, then SIGKILL to its group
// after KillGrace) when ctx ends, when c.Timeout elapses, or when its
// output exceeds c.OutputLimit.
func Start(ctx context.Context, c Command) (*Process, error) {
	if c.Path == "" {
		return nil, &StartError{Reason: "empty executable path"}
	}
	if c.OutputLimit <= 0 {
		return nil, &StartError{Reason: "output limit must be positive"}
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.StderrBytes <= 0 {
		c.StderrBytes = DefaultStderrBytes
	}
	path, err := filepath.Abs(c.Path)
	if err != nil {
		return nil, startError("resolve executable path", err)
	}
	dir := c.Dir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, startError("resolve working directory", err)
		}
	}
	if c.Sandbox != nil {
		if c.Reaper == nil || !reaperSupported {
			return nil, &StartError{Reason: "sandbox needs a reaper on Linux"}
		}
		if c.Sandbox.Check() != nil {
			return nil, &StartError{Reason: "malformed sandbox policy"}
		}
	} else if c.Program != nil {
		return nil, &StartError{Reason: "an opened program needs a sandbox"}
	}
	argv := append([]string{path}, c.Args...)
	env := dedupEnv(c.Env)
	if hasNUL(dir) || slices.ContainsFunc(argv, hasNUL) || slices.ContainsFunc(env, hasNUL) {
		return nil, &StartError{Reason: "argument, environment or directory contains NUL"}
	}
	p := &Process{
		pidfd:      -1,
		killGrace:  c.KillGrace,
		stderr:     &headBuffer{limit: c.StderrBytes},
		budget:     newBudget(c.OutputLimit),
		stderrDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		parentReads := i > 0
		parent, child, err := childPipe(parentReads)
		if err != nil {
			closeFiles(pipes[:i]...)
			return nil, startError("create pipe", err)
		}
		if parentReads {
			pipes[i], pipes[i+1] = parent, child
		} else {
			pipes[i], pipes[i+1] = child, parent
		}
	}
	if c.Reaper != nil && reaperSupported {
		p.pool = c.Reaper
		if cg := c.Reaper.containment(); cg != nil && c.Sandbox != nil {
			p.inv, err = cg.create()
		}
		if err == nil {
			p.rc, p.pid, err = c.Reaper.spawn(spawnRequest{path: path, dir: dir, argv: argv, env: env, sandbox: c.Sandbox, program: c.Program != nil},
				[3]*os.File{pipes[0], pipes[3], pipes[5]}, c.Program, p.inv, pipes[2])
			if err != nil && p.inv != nil {
				p.inv.finish()
			}
			if err == nil && p.inv != nil {
				// Its reaper reaps the child only after reporting it
				// started, so the pid is still the child's.
				p.pidfd = openPidfd(p.pid)
			}
		}
	} else {
		p.cmd = &exec.Cmd{
			Path:        path,
			Args:        argv,
			Env:         env,
			Dir:         dir,
			Stdin:       pipes[0],
			Stdout:      pipes[3],
			Stderr:      pipes[5],
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		}
		if err = p.cmd.Start(); err != nil {
			err = startError("spawn", err)
		} else {
			p.pid = p.cmd.Process.Pid
		}
	}
	closeFiles(pipes[0], pipes[3], pipes[5]) // the child's ends
	if err != nil {
		closeFiles(pipes[1], pipes[2], pipes[4])
		return nil, err
	}
	p.stdin, p.stdoutR, p.stderrR = pipes[1], pipes[2], pipes[4]
	p.stdout = &meteredReader{r: p.stdoutR, b: p.budget}
	p.watch(ctx, c.Timeout)
	go p.copyStderr()
	go p.wait()
	return p, nil
}

// dedupEnv returns a copy of env (never nil: nil would mean os.Environ()
// to os/exec) in which only the last entry of each variable is kept, where
// that last entry stood: the child sees exactly what os/exec would give it,
// with or without a reaper.
func dedupEnv(env []string) []string {
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		key, _, _ := strings.Cut(env[i], "=")
		if !seen[key] {
			seen[key] = true
			out = append(out, env[i])
		}
	}
	slices.Reverse(out)
	return out
}

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// Pid returns the child's process id (also when wrapped: the reaper's
// child).
func (p *Process) Pid() int { return p.pid }

// Stdin returns the write end of the child's stdin.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout returns the read end of the child's stdout, metered against the
// output budget: once the budget is exceeded it returns ErrOutputLimit.
func (p *Process) Stdout() io.Reader { return p.stdout }

// CloseStdout closes the read end of stdout, unblocking a pending read.
func (p *Process) CloseStdout() { p.stdoutR.Close() }

// Exceeded is closed when the child's combined output exceeds the budget.
func (p *Process) Exceeded() <-chan struct{} { return p.budget.exceeded }

// Done is closed when the child has been reaped and stderr drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until Done and returns how the child ended, with
// ErrOutputLimit, ErrTimeout or the context's error when supervise stopped
// it for that reason (the first reason wins).
func (p *Process) Wait() (Exit, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.reason
}

// Ended reports whether a contained child has exited (reaped or not); a
// child that is not contained, or whose exit cannot be watched, counts as
// ended. What a caller reads from stdout while Ended is false was written
// while the child ran.
func (p *Process) Ended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reaped || p.pidfd < 0 || pidfdExited(p.pidfd)
}

// StdoutHeld reports whether, when a contained child ended, a process it
// started still held the child's stdout open (it was killed before Wait
// returned): what the caller reads from stdout may then have been
// written after the child's end, by that process. It is false for a
// child that is not contained, and before Done.
func (p *Process) StdoutHeld() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reaped && p.sweep.held
}

// Stderr returns the privately kept start of the child's stderr. It is for
// local diagnostics only and must never be forwarded or put in errors.
func (p *Process) Stderr() []byte { return p.stderr.bytes() }

// StderrTotal returns how many stderr bytes the child wrote in all.
func (p *Process) StderrTotal() int64 { return p.stderr.total() }

// Terminate asks the child to stop: SIGTERM and SIGCONT to its process
// group (sent by the reaper when wrapped); SIGKILL to the group follows
// after KillGrace. It does nothing once the child has been reaped.
func (p *Process) Terminate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped || p.termSent {
		return
	}
	p.termSent = true
	if p.rc != nil {
		p.rc.signal(msgTerminate)
	} else {
		syscall.Kill(-p.pid, syscall.SIGTERM)
		syscall.Kill(-p.pid, syscall.SIGCONT)
	}
	p.killTimer = time.AfterFunc(p.killGrace, p.Kill)
}

// Kill sends SIGKILL to the child's process group at once.
//
// When wrapped, the reaper does the killing; a reaper that does not report
// the child's end within reaperUnresponsive after that (stopped by the
// program, say) is itself killed, which takes the child with it (its
// parent-death signal) and ends Wait.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.reaped:
	case p.rc != nil:
		p.rc.signal(msgKill)
		if p.reaperTimer == nil {
			rc := p.rc
			p.reaperTimer = time.AfterFunc(p.killGrace+reaperUnresponsive, func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				if !p.reaped {
					rc.kill()
				}
			})
		}
	default:
		syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

// Close releases the caller's pipe ends. Call it after Wait.
func (p *Process) Close() {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		p.stdoutR.Close()
	})
}

// stopFor stops the child for reason, unless it has been reaped already.
func (p *Process) stopFor(reason error) {
	p.mu.Lock()
	if p.reaped {
		p.mu.Unlock()
		return
	}
	if p.reason == nil {
		p.reason = reason
	}
	p.mu.Unlock()
	p.Terminate()
}

// watch arranges for the child to be stopped at the first of: context
// end, timeout, budget exceeded; a context that has ended is preferred
// over the other reasons. It uses callbacks rather than a goroutine, so a
// child that simply exits wakes nothing up; wait disarms them.
func (p *Process) watch(ctx context.Context, timeout time.Duration) {
	reason := func(r error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return r
	}
	p.budget.onExceed = func() { p.stopFor(reason(ErrOutputLimit)) }
	stopCtx := context.AfterFunc(ctx, func() { p.stopFor(ctx.Err()) })
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { p.stopFor(reason(ErrTimeout)) })
	}
	p.disarm = func() {
		stopCtx()
		if timer != nil {
			timer.Stop()
		}
	}
}

// wait reaps the child, then gives stderr killGrace to drain.
func (p *Process) wait() {
	if p.rc != nil {
		p.waitWrapped()
	} else {
		p.waitDirect()
	}
	p.disarm()
	t := time.NewTimer(p.killGrace)
	select {
	case <-p.stderrDone:
	case <-t.C:
		p.stderrR.Close() // a leftover process still holds stderr open
		<-p.stderrDone
	}
	t.Stop()
	close(p.done)
}

// waitDirect reaps a child started without a reaper. On Linux it first
// learns of the exit without reaping, then, holding the lock that every
// group signal takes, kills what is left of the group and reaps: a signal
// can never reach a recycled process group id. Elsewhere it reaps first (a
// small race remains there).
func (p *Process) waitDirect() {
	if awaitExitNoReap(p.pid) {
		p.mu.Lock()
		syscall.Kill(-p.pid, syscall.SIGKILL)
		p.cmd.Wait() // the child is a zombie: this returns at once
	} else {
		p.cmd.Wait()
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	p.reapedLocked()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.exit = Exit{Code: -1, Signal: ws.Signal()}
	} else {
		p.exit = Exit{Code: p.cmd.ProcessState.ExitCode()}
	}
}

// waitWrapped waits for the reaper's report that the child was reaped and
// its descendants swept. The reaper then goes back to the pool, unless its
// sweep ran out of time (leftovers would be blamed on its next child) or
// it failed; a failed reaper is stopped, and the child, which dies with
// it, is reported as killed.
func (p *Process) waitWrapped() {
	r, err := p.rc.read()
	healthy := err == nil && r.kind == msgExited && r.contained == (p.inv != nil)
	// A contained child's cgroup is emptied by its reaper; what a failed
	// reaper left there is killed here, and the cgroup removed. One that
	// still holds processes stays.
	contained := true
	switch {
	case p.inv == nil:
	case healthy && r.survivors:
		p.inv.abandon()
		contained = false
	default:
		contained = p.inv.finish()
	}
	p.mu.Lock()
	p.reapedLocked()
	if healthy {
		p.exit = Exit{Code: r.code, Signal: syscall.Signal(r.signal)}
		p.sweep = sweepReport{fast: r.fast, term: r.term, kill: r.kill, timedOut: r.timedOut,
			contained: r.contained, held: r.held, survivors: r.survivors}
	} else {
		p.exit = Exit{Code: -1, Signal: syscall.SIGKILL}
		p.sweep.held = p.inv != nil // unknown: taken as the worse
	}
	if !contained {
		p.reason = ErrSurvivors
	}
	if p.pidfd >= 0 {
		syscall.Close(p.pidfd)
		p.pidfd = -1
	}
	p.mu.Unlock()
	p.rc.disarm() // what is left of a timed-out sweep is refused until the reaper is stopped
	if healthy && !r.timedOut && contained {
		p.pool.put(p.rc)
	} else {
		p.rc.stop()
	}
}

// reapedLocked marks the child reaped; p.mu is held.
func (p *Process) reapedLocked() {
	p.reaped = true
	if p.reaperTimer != nil {
		p.reaperTimer.Stop()
	}
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
}

func (p *Process) copyStderr() {
	defer close(p.stderrDone)
	buf := make([]byte, 4096)
	for {
		n, err := p.stderrR.Read(buf)
		if n > 0 && p.budget.add(n) {
			p.stderr.write(buf[:n])
		} else if n > 0 {
			p.stderr.count(n)
		}
		if err != nil {
			p.stderrR.Close()
			return
		}
	}
}

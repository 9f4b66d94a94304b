package supervise

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
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
	// Reaper is the path of a binary that dispatches ReaperArg to
	// ReaperMain (usually os.Executable()). When set on Linux the child runs
	// under that subreaper wrapper. Ignored on other systems. The binary
	// must be built from this version of the package: the reaper's
	// arguments are private to it.
	Reaper string
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
	cmd       *exec.Cmd
	pid       int
	wrapped   bool
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
	reason    error
	exit      Exit
	closeOnce sync.Once

	// execR is the read end of the reaper's exec-failure report (wrapped
	// children only); execFailed is set from it once the child is reaped.
	execR      *os.File
	execFailed bool
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
	argv := append([]string{path}, c.Args...)
	env := append([]string{}, c.Env...) // never nil: nil would mean os.Environ()
	exe, wrapped := path, false
	if c.Reaper != "" && reaperSupported {
		if err := checkExecutable(path); err != nil {
			return nil, err
		}
		reaper, err := filepath.Abs(c.Reaper)
		if err != nil {
			return nil, startError("resolve reaper path", err)
		}
		exe, wrapped = reaper, true
		argv, env = reaperCommand(reaper, argv, env)
	}
	p := &Process{
		wrapped:    wrapped,
		killGrace:  c.KillGrace,
		stderr:     &headBuffer{limit: c.StderrBytes},
		budget:     newBudget(c.OutputLimit),
		stderrDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(pipes[:i]...)
			return nil, startError("create pipe", err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	var execW *os.File
	if wrapped {
		// The reaper reports a failed exec of the program (bad
		// interpreter, ENOEXEC, …) on this pipe (its fd 3), so that it is a
		// start failure rather than the program's own exit status.
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(pipes[:]...)
			return nil, startError("create pipe", err)
		}
		p.execR, execW = r, w
	}
	p.cmd = &exec.Cmd{
		Path:        exe,
		Args:        argv,
		Env:         env,
		Dir:         c.Dir,
		Stdin:       pipes[0],
		Stdout:      pipes[3],
		Stderr:      pipes[5],
		SysProcAttr: procAttr(wrapped),
	}
	if execW != nil {
		p.cmd.ExtraFiles = []*os.File{execW}
	}
	err = p.cmd.Start()
	closeFiles(pipes[0], pipes[3], pipes[5], execW) // the child's ends
	if err != nil {
		closeFiles(pipes[1], pipes[2], pipes[4], p.execR)
		return nil, startError("spawn", err)
	}
	p.pid = p.cmd.Process.Pid
	p.stdin, p.stdoutR, p.stderrR = pipes[1], pipes[2], pipes[4]
	p.stdout = &meteredReader{r: p.stdoutR, b: p.budget}
	go p.copyStderr()
	go p.wait()
	go p.watch(ctx, c.Timeout)
	return p, nil
}

// The reaper is a Go program, and the Go runtime sizes itself at start
// from GOMAXPROCS or, without it, from the CPU affinity and cgroup CPU
// limits, which costs /proc and /sys reads and more threads on every
// plugin start. When the program's environment does not set GOMAXPROCS,
// supervise appends reaperRuntimeEnv to the reaper's environment and puts
// reaperEnvFlag before the program's path; the reaper then removes that
// last entry again, so the program's environment stays exactly Env.
const (
	reaperEnvFlag = "-drop-last-env" // never an absolute path
	// reaperExecFDFlag tells the reaper that fd 3 is the write end of the
	// exec-failure report (see Process.ExecFailed).
	reaperExecFDFlag = "-exec-report-fd3"
	reaperRuntimeEnv = "GOMAXPROCS=1"
)

// reaperCommand returns the reaper's argv and environment for the program
// argv with environment env.
func reaperCommand(reaper string, argv, env []string) ([]string, []string) {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return append([]string{reaper, ReaperArg, reaperExecFDFlag}, argv...), env
		}
	}
	return append([]string{reaper, ReaperArg, reaperExecFDFlag, reaperEnvFlag}, argv...), append(env, reaperRuntimeEnv)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// checkExecutable is the spawn check made before a reaper starts the
// program, so that common spawn failures stay distinguishable from the
// program's own nonzero exit.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return startError("spawn", err)
	}
	if !fi.Mode().IsRegular() {
		return &StartError{Reason: "spawn", Err: syscall.EACCES}
	}
	if err := syscall.Access(path, 1 /* X_OK */); err != nil {
		return startError("spawn", err)
	}
	return nil
}

// ExecFailed reports, after the child was reaped (Done closed), whether a
// reaper could not execute the program (bad interpreter, wrong format, …):
// a start failure that only shows after Start returned. It is always false
// without a reaper.
func (p *Process) ExecFailed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.execFailed
}

// Pid returns the child's process id (the reaper's when wrapped).
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

// Stderr returns the privately kept start of the child's stderr. It is for
// local diagnostics only and must never be forwarded or put in errors.
func (p *Process) Stderr() []byte { return p.stderr.bytes() }

// StderrTotal returns how many stderr bytes the child wrote in all.
func (p *Process) StderrTotal() int64 { return p.stderr.total() }

// Terminate asks the child to stop: SIGTERM to the reaper when wrapped (it
// forwards the signal and cleans up), else SIGTERM and SIGCONT to the
// process group; SIGKILL to the group follows after KillGrace. It does
// nothing once the child has been reaped.
func (p *Process) Terminate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped || p.termSent {
		return
	}
	p.termSent = true
	if p.wrapped {
		syscall.Kill(p.pid, syscall.SIGTERM)
	} else {
		syscall.Kill(-p.pid, syscall.SIGTERM)
		syscall.Kill(-p.pid, syscall.SIGCONT)
	}
	p.killTimer = time.AfterFunc(p.killGrace, p.Kill)
}

// Kill sends SIGKILL to the child's process group at once.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
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

func (p *Process) stopFor(reason error) {
	p.mu.Lock()
	if p.reason == nil {
		p.reason = reason
	}
	p.mu.Unlock()
	p.Terminate()
}

// watch stops the child for the first of: context end, timeout, budget
// exceeded. A context that has ended is preferred over the other reasons.
func (p *Process) watch(ctx context.Context, timeout time.Duration) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var reason error
	select {
	case <-p.done:
		return
	case <-ctx.Done():
	case <-expired:
		reason = ErrTimeout
	case <-p.budget.exceeded:
		reason = ErrOutputLimit
	}
	if err := ctx.Err(); err != nil {
		reason = err
	}
	p.stopFor(reason)
}

// wait reaps the child. On Linux it first learns of the exit without
// reaping, then, holding the lock that every group signal takes, kills
// what is left of the group and reaps: a signal can never reach a recycled
// process group id. Elsewhere it reaps first (a small race remains there).
func (p *Process) wait() {
	if awaitExitNoReap(p.pid) {
		p.mu.Lock()
		syscall.Kill(-p.pid, syscall.SIGKILL)
		p.cmd.Wait() // the child is a zombie: this returns at once
		p.reapedLocked()
		p.mu.Unlock()
	} else {
		p.cmd.Wait()
		p.mu.Lock()
		p.reapedLocked()
		p.mu.Unlock()
	}
	if p.execR != nil {
		// The reaper has exited, so every write end is closed: this read
		// returns at once (one byte on a failed exec, else EOF).
		var b [1]byte
		n, _ := p.execR.Read(b[:])
		p.execR.Close()
		p.mu.Lock()
		p.execFailed = n == 1
		p.mu.Unlock()
	}
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

// reapedLocked records the reaped child's exit; p.mu is held.
func (p *Process) reapedLocked() {
	p.reaped = true
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.exit = Exit{Code: -1, Signal: ws.Signal()}
	} else {
		p.exit = Exit{Code: p.cmd.ProcessState.ExitCode()}
	}
}

func (p *Process) copyStderr() {
	defer close(p.stderrDone)
	buf := make([]byte, 32*1024)
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

package conformance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one plugin process in its own process group. stdin and stdout
// are raw pipes, stderr goes to the null device (it is private to the
// plugin and never judged).
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File // write end
	stdout *os.File // read end
	now    func() time.Time

	exited chan struct{} // closed once the leader exited and was reaped

	mu       sync.Mutex
	reaped   bool // the group id may no longer be ours to signal
	state    *os.ProcessState
	waitErr  error
	exitedAt time.Time

	closeIn  sync.Once
	closeOut sync.Once
}

// startProc starts argv with exactly env, a new process group, piped stdin
// and stdout, and stderr discarded.
func startProc(argv, env []string, now func() time.Time) (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if env == nil {
		env = []string{} // nil would make exec inherit the suite's environment
	}
	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         env,
		Stdin:       inR,
		Stdout:      outW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, errors.New("start plugin: cannot execute the plugin command")
	}
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, now: now, exited: make(chan struct{})}
	go p.wait()
	return p, nil
}

// wait observes the leader's exit, kills whatever is left of its group
// while the leader's id is still reserved, then reaps it.
func (p *proc) wait() {
	observed := waitExit(p.cmd.Process.Pid)
	if observed {
		at := p.now()
		p.mu.Lock()
		p.exitedAt = at
		p.killGroupLocked()
		p.reaped = true
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	at := p.now()
	p.mu.Lock()
	if !observed {
		// Best effort only: the leader is reaped, so its id is free again.
		p.exitedAt = at
		p.killGroupLocked()
		p.reaped = true
	}
	p.state, p.waitErr = p.cmd.ProcessState, err
	p.mu.Unlock()
	close(p.exited)
}

// kill sends SIGKILL to the plugin's process group unless the leader was
// already reaped (the wait goroutine killed the group just before).
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		p.killGroupLocked()
	}
}

func (p *proc) killGroupLocked() {
	// The group id equals the leader's pid; while the leader is not yet
	// reaped that id cannot be reused, so this never hits a stranger.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// closeStdin closes the write end of the plugin's stdin once.
func (p *proc) closeStdin() {
	p.closeIn.Do(func() { p.stdin.Close() })
}

// closeStdout closes the read end of the plugin's stdout once, which also
// unblocks a pending read.
func (p *proc) closeStdout() {
	p.closeOut.Do(func() { p.stdout.Close() })
}

// stop kills the group, closes both pipes and waits for the reap.
func (p *proc) stop() {
	p.kill()
	p.closeStdin()
	p.closeStdout()
	<-p.exited
}

// exitStatus describes how the leader ended: code is the exit code, or -1
// when a signal ended it (signal is then set).
func (p *proc) exitStatus() (code int, signal syscall.Signal, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return -1, 0, p.exitedAt
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal(), p.exitedAt
	}
	return p.state.ExitCode(), 0, p.exitedAt
}

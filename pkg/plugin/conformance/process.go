package conformance

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// proc is one plugin process, started through pkg/supervise exactly as the
// Worker starts plugins: its own process group, the exact environment,
// stdin and stdout as pipes, stderr kept privately and never judged, and,
// when a reaper pool is given, the Linux child-subreaper wrapper. The
// wrapper reaps the plugin and sweeps every descendant it left behind,
// setsid ones included, before the exit is reported; without it only the
// process group is cleaned up. proc imposes no output budget or timeout of
// its own: the scenario bounds and the frame reader do.
type proc struct {
	sp     *supervise.Process
	stdout io.Reader // metered by supervise against an unlimited budget
	now    func() time.Time

	exited chan struct{} // closed once the plugin was reaped and its tree cleaned up

	mu       sync.Mutex
	done     bool
	exit     supervise.Exit
	exitedAt time.Time

	closeIn  sync.Once
	closeOut sync.Once
}

// startProc starts argv with exactly env under reaper (nil: no wrapper).
func startProc(argv, env []string, reaper *supervise.ReaperPool, now func() time.Time) (*proc, error) {
	if env == nil {
		env = []string{} // never the suite's own environment
	}
	sp, err := supervise.Start(context.Background(), supervise.Command{
		Path:        argv[0],
		Args:        argv[1:],
		Env:         env,
		Reaper:      reaper,
		OutputLimit: math.MaxInt64,
	})
	if err != nil {
		return nil, errors.New("start plugin: cannot execute the plugin command")
	}
	p := &proc{sp: sp, stdout: sp.Stdout(), now: now, exited: make(chan struct{})}
	go p.wait()
	return p, nil
}

// wait records how the plugin ended once supervise reports it reaped (and,
// under the wrapper, its descendants swept), and when that was observed.
func (p *proc) wait() {
	exit, _ := p.sp.Wait()
	at := p.now()
	p.mu.Lock()
	p.done, p.exit, p.exitedAt = true, exit, at
	p.mu.Unlock()
	close(p.exited)
}

// kill sends SIGKILL to the plugin's process group (through the wrapper
// when there is one); it does nothing once the plugin was reaped.
func (p *proc) kill() { p.sp.Kill() }

// closeStdin closes the write end of the plugin's stdin once.
func (p *proc) closeStdin() {
	p.closeIn.Do(func() { p.sp.Stdin().Close() })
}

// closeStdout closes the read end of the plugin's stdout once, which also
// unblocks a pending read.
func (p *proc) closeStdout() {
	p.closeOut.Do(p.sp.CloseStdout)
}

// write writes to the plugin's stdin.
func (p *proc) write(data string) error {
	_, err := io.WriteString(p.sp.Stdin(), data)
	return err
}

// stop kills the group, closes both pipes and waits until the plugin and
// its tree were cleaned up.
func (p *proc) stop() {
	p.kill()
	p.closeStdin()
	p.closeStdout()
	<-p.exited
	p.sp.Close()
}

// exitStatus describes how the plugin ended: code is the exit code, or -1
// when a signal ended it (signal is then set) or it has not ended yet.
func (p *proc) exitStatus() (code int, signal syscall.Signal, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		return -1, 0, p.exitedAt
	}
	return p.exit.Code, p.exit.Signal, p.exitedAt
}

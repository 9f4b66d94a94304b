package conformance

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
)

// attempt is one scenario's plugin process with its bound: a writer that
// feeds stdin in order, a bounded frame reader over stdout, and the
// deadlines that end it.
type attempt struct {
	p   *proc
	out *bufio.Reader

	chunks chan chunk
	wrote  chan struct{} // closed when the writer goroutine ended

	expiredCh chan struct{} // the scenario bound passed (or the run was interrupted)
	lateCh    chan struct{} // the 250 ms exit window after stdin closed passed
	once      sync.Once
	lateOnce  sync.Once
}

type chunk struct {
	data  string
	close bool
}

func newAttempt(p *proc) *attempt {
	a := &attempt{
		p:         p,
		out:       bufio.NewReaderSize(p.stdout, 64<<10),
		chunks:    make(chan chunk, 8),
		wrote:     make(chan struct{}),
		expiredCh: make(chan struct{}),
		lateCh:    make(chan struct{}),
	}
	go a.writer()
	return a
}

// writer writes chunks in order. Write errors (the plugin stopped reading
// or exited) are expected for invalid input and ignored; the plugin's
// stdout and exit status are what is judged.
func (a *attempt) writer() {
	defer close(a.wrote)
	broken := false
	for c := range a.chunks {
		if !broken && c.data != "" {
			if err := a.p.write(c.data); err != nil {
				broken = true
			}
		}
		if c.close {
			a.p.closeStdin()
		}
	}
}

// send queues data for stdin, closing stdin afterwards when closeAfter.
func (a *attempt) send(data string, closeAfter bool) {
	a.chunks <- chunk{data, closeAfter}
}

// expire ends the attempt because its bound passed.
func (a *attempt) expire() {
	a.once.Do(func() {
		close(a.expiredCh)
		a.p.kill()
		a.p.closeStdin()
		a.p.closeStdout()
	})
}

// late ends the attempt because the plugin did not finish within the exit
// window.
func (a *attempt) late() {
	a.lateOnce.Do(func() {
		close(a.lateCh)
		a.p.kill()
		a.p.closeStdout()
	})
}

func (a *attempt) expired() bool { return closed(a.expiredCh) }

func (a *attempt) wasLate() bool { return closed(a.lateCh) }

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// finish stops the process and the writer.
func (a *attempt) finish() {
	close(a.chunks)
	a.p.stop()
	<-a.wrote
}

// readFrame reads one plugin frame line with the protocol's bounded reader.
func (a *attempt) readFrame() ([]byte, error) {
	return plugin.ReadFrame(a.out)
}

// drain reads stdout until EOF and returns how many bytes came. It stops
// early at the first byte when stopAtFirst.
func (a *attempt) drain(stopAtFirst bool) (int, error) {
	buf := make([]byte, 32<<10)
	total := 0
	for {
		n, err := a.out.Read(buf)
		total += n
		if total > 0 && stopAtFirst {
			return total, nil
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// waitExit waits until the leader exited or a deadline ended the attempt.
// It reports whether the process exited on its own terms.
func (a *attempt) waitExit() bool {
	select {
	case <-a.p.exited:
		return !a.expired() && !a.wasLate()
	case <-a.expiredCh:
		return false
	case <-a.lateCh:
		return false
	}
}

// startExitWindow arms the exit window (after closing stdin, or after a
// cancel) and returns when it started and a function to disarm it.
func (a *attempt) startExitWindow(now func() time.Time) (time.Time, func()) {
	start := now()
	t := time.AfterFunc(exitWindow, a.late)
	return start, func() { t.Stop() }
}

// exitWindow is the protocol's bound on a plugin's exit after the Worker
// closes stdin, and on its terminal frame and exit after a cancel: the
// Worker's own constant.
const exitWindow = host.ExitWindow

package supervise

import (
	"bytes"
	"context"
	"io"
	"time"
)

// Result is the outcome of Run.
type Result struct {
	Exit   Exit
	Stdout []byte // everything the child wrote to stdout, within the budget
	Stderr []byte // the privately kept start of stderr; never forward it
}

// Run starts c, writes stdin to it and closes its stdin, collects stdout
// within the output budget, and waits. The error is a *StartError, or
// ErrOutputLimit, ErrTimeout or the context's error when supervise stopped
// the child; a child that merely exits nonzero is not an error.
func Run(ctx context.Context, c Command, stdin []byte) (Result, error) {
	return RunFrom(ctx, c, bytes.NewReader(stdin))
}

// RunFrom is Run with stdin streamed from a reader (a file too large to
// hold in memory); a child that exits before reading it all ends the copy.
func RunFrom(ctx context.Context, c Command, stdin io.Reader) (Result, error) {
	p, err := Start(ctx, c)
	if err != nil {
		return Result{}, err
	}
	defer p.Close()
	go func() {
		io.Copy(p.Stdin(), stdin) // EPIPE when the child ignores its input
		p.Stdin().Close()
	}()
	var out []byte
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		buf := make([]byte, 32*1024)
		for {
			n, err := p.Stdout().Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				return
			}
		}
	}()
	exit, reason := p.Wait()
	t := time.NewTimer(p.killGrace)
	select {
	case <-outDone:
	case <-t.C:
		p.CloseStdout() // a leftover process still holds stdout open
		<-outDone
	}
	t.Stop()
	if reason == nil && p.budget.over() {
		reason = ErrOutputLimit
	}
	return Result{Exit: exit, Stdout: out, Stderr: p.Stderr()}, reason
}

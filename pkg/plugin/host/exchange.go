package host

import (
	"context"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// exchange drives the session until its outcome is known. ctx combines the
// caller's context and the operation timeout. The caller (Run) decides the
// final precedence; exchange only reports what the session itself showed.
func (r *runner) exchange(ctx context.Context) (Outcome, error) {
	r.send(r.initialize)
	if err := r.negotiate(ctx); err != nil || ctx.Err() != nil || r.limitSelected {
		return Outcome{}, err
	}
	if err := r.sess.Accept(r.executeFrame); err != nil {
		return Outcome{}, violation("execute", err)
	}
	r.send(r.execute)
	terminal, err := r.execution(ctx)
	if err != nil || r.limitSelected {
		return Outcome{}, err
	}
	if terminal == nil { // the context ended during execution
		r.cancel(ctx)
		return Outcome{}, nil
	}
	if err := r.finish(ctx); err != nil {
		return Outcome{}, err
	}
	if terminal.Type == plugin.TypeFailure {
		return Outcome{}, &Error{Kind: KindFailure, Category: terminal.Category}
	}
	return Outcome{
		Selected:      r.sess.Selection(),
		Output:        deref(terminal.Output),
		CommitSubject: terminal.CommitSubject,
		Summary:       terminal.Summary,
		Changes:       terminal.Changes,
		Progress:      r.sess.ProgressCount(),
	}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// exitGrace bounds how long Run keeps reading after the plugin process was
// reaped but its stdout has not ended (a leftover process holds it).
func (r *runner) exitGrace(ev event, timer *<-chan time.Time) {
	if ev == evExited && *timer == nil {
		*timer = time.After(ExitWindow)
	}
}

// negotiate waits for a valid initialized frame that selects the
// operation. It returns nil with ctx ended or the limit selected too.
func (r *runner) negotiate(ctx context.Context) error {
	var grace <-chan time.Time
	for {
		ev, res := r.next(ctx, grace)
		switch ev {
		case evFrame:
			if err := r.sess.Accept(res.frame); err != nil {
				return violation("initialized", err)
			}
			if !r.sess.Negotiated(r.op.Capability()) {
				return violation("the selection lacks the operation's capability", nil)
			}
			return nil
		case evReadErr:
			return violation("reading initialized", res.err)
		case evEOF:
			return violation("stdout ended before initialized", nil)
		case evDone:
			return nil
		case evExceeded:
			r.overLimit(ctx)
			return nil
		case evExited:
			r.exitGrace(ev, &grace)
		case evTimer:
			return violation("plugin exited before initialized", nil)
		}
	}
}

// execution reads progress frames until the terminal frame. It returns a
// nil frame and nil error when ctx ended first.
func (r *runner) execution(ctx context.Context) (*plugin.Frame, error) {
	var grace <-chan time.Time
	for {
		ev, res := r.next(ctx, grace)
		switch ev {
		case evFrame:
			f := res.frame
			if err := r.sess.Accept(f); err != nil {
				return nil, violation(string(f.Type), err)
			}
			if f.Type.Terminal() {
				// Read after the plugin's end, it may have been written
				// by a process the plugin left (see Run).
				r.lateTerminal = r.proc.Ended()
				return &f, nil
			}
			// Accept admits only progress here (read refuses Worker frames).
			if r.onProgress != nil && ctx.Err() == nil {
				r.onProgress(Progress{Sequence: f.Sequence, Stage: f.Stage, Text: f.Text})
			}
		case evReadErr:
			return nil, violation("reading execution frames", res.err)
		case evEOF:
			return nil, violation("stdout ended before the terminal frame", nil)
		case evDone:
			return nil, nil
		case evExceeded:
			r.overLimit(ctx)
			return nil, nil
		case evExited:
			r.exitGrace(ev, &grace)
		case evTimer:
			return nil, violation("plugin exited before the terminal frame", nil)
		}
	}
}

// finish closes stdin and requires clean stdout EOF and exit 0 within
// ExitWindow. A context that ends meanwhile does not interrupt it (there
// is nothing left to cancel); Run's precedence decides the outcome.
func (r *runner) finish(ctx context.Context) error {
	r.closeStdin()
	window := time.NewTimer(ExitWindow)
	defer window.Stop()
	for !(r.eof && r.exited == nil) {
		ev, res := r.next(context.Background(), window.C)
		switch ev {
		case evFrame, evReadErr:
			return violation("output after the terminal frame", res.err)
		case evExceeded:
			r.overLimit(ctx)
			return nil
		case evTimer:
			return violation("plugin did not end stdout and exit within 250ms", nil)
		}
	}
	if exit, _ := r.proc.Wait(); !exit.Success() {
		return violation("nonzero exit status", nil)
	}
	return nil
}

// cancel sends exactly one cancel frame when negotiated (else terminates
// at once), then drains frames for ExitWindow before cleanup terminates.
func (r *runner) cancel(ctx context.Context) {
	cancelFrame := plugin.Frame{ID: r.sess.ID(), Type: plugin.TypeCancel}
	if !r.sess.Negotiated(plugin.CapCancel) || r.sess.Accept(cancelFrame) != nil {
		r.proc.Terminate()
		return
	}
	b, err := plugin.Encode(cancelFrame)
	if err != nil {
		r.proc.Terminate()
		return
	}
	r.send(b)
	window := time.NewTimer(ExitWindow)
	defer window.Stop()
	for !(r.eof && r.exited == nil) {
		ev, res := r.next(context.Background(), window.C)
		switch ev {
		case evFrame:
			// Frames still count as protocol, but the outcome is decided:
			// the plugin gets its drain window unless it breaks the rules.
			if r.sess.Accept(res.frame) != nil {
				return
			}
			if res.frame.Type.Terminal() {
				r.closeStdin()
			}
		case evReadErr, evTimer:
			return
		case evExceeded:
			r.overLimit(ctx) // ctx has ended: never selected, just stopped
			return
		}
	}
}

package conformance

import (
	"errors"
	"io"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// judgeSession runs a valid session and judges every byte the plugin
// writes: each frame valid and compact with exactly its fields, the
// session id, legal order, negotiated fields and progress only, progress
// numbered from 1 within the limits, exactly one terminal frame, then,
// after stdin is closed, clean stdout EOF and exit 0 within 250 ms
// (host.ExitWindow). When the request ends with a cancel (CancelWindow),
// the terminal frame, EOF and exit must all come within that window of
// sending the cancel: the Worker terminates the plugin then.
func (s *suite) judgeSession(a *attempt, sc Scenario, r *Request, ws *workspace) error {
	err := s.session(a, sc, r, ws)
	if sc.CancelWindow && errors.Is(err, errLate) {
		return errCancelLate
	}
	return err
}

func (s *suite) session(a *attempt, sc Scenario, r *Request, ws *workspace) error {
	sess, err := s.negotiate(a, r)
	if err != nil {
		return err
	}
	if sc.Requires != "" && !sess.Negotiated(sc.Requires) {
		return errNotApplicable{sc.Requires}
	}
	data := sc.Bytes(r)
	if err := acceptOwn(sess, data, true); err != nil {
		return err
	}
	a.send(data, false)
	// After a cancel the Worker allows one window for the terminal frame,
	// clean stdout EOF and the exit together; otherwise the window opens
	// when stdin is closed after the terminal frame.
	var start time.Time
	if sc.CancelWindow {
		var disarm func()
		start, disarm = a.startExitWindow(s.now)
		defer disarm()
	}
	var terminal plugin.Frame
	for n := 2; !sess.Done(); n++ {
		line, err := a.readFrame()
		if errors.Is(err, io.EOF) && !a.wasLate() {
			return fail("stdout ended before the terminal frame%s", exitNote(a))
		}
		if err != nil {
			return readFailure(a, err)
		}
		if terminal, err = acceptPlugin(sess, line); err != nil {
			return fail("frame %d: %v", n, err)
		}
	}
	if terminal.Type == plugin.TypeFailure && !sc.AllowFailure {
		return fail("answered a valid request with a failure frame (category %s)", terminal.Category)
	}

	a.send("", true)
	if !sc.CancelWindow {
		var disarm func()
		start, disarm = a.startExitWindow(s.now)
		defer disarm()
	}
	n, err := a.drain(false)
	if n > 0 {
		return fail("wrote %d bytes after the terminal frame", n)
	}
	if err != nil {
		return readFailure(a, err)
	}
	if !a.waitExit() {
		if a.wasLate() {
			return errLate
		}
		return errTimeout
	}
	code, sig, at := a.p.exitStatus()
	switch {
	case sig != 0:
		return fail("killed by signal %d at the end of a valid session", int(sig))
	case code != 0:
		return fail("exited %d at the end of a valid session", code)
	case at.Sub(start) > exitWindow:
		return errLate
	}
	if ws != nil {
		return ws.checkAfterSession(terminal.Type == plugin.TypeResult)
	}
	return nil
}

package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// errNotApplicable marks a scenario that needs a capability the plugin did
// not select.
type errNotApplicable struct{ capability plugin.Capability }

func (e errNotApplicable) Error() string {
	return "not applicable: the plugin did not select " + string(e.capability)
}

// fail builds a scenario failure reason. Reasons are fixed texts, counts
// and protocol errors (which never echo frame content).
func fail(format string, args ...any) error { return fmt.Errorf(format, args...) }

// judge runs scenario sc against the started attempt a.
func (s *suite) judge(a *attempt, sc Scenario, r *Request, ws *workspace) error {
	switch sc.Expect {
	case ExpectSilentExit:
		a.send(sc.Bytes(r), sc.CloseStdin)
		if n, err := a.drain(true); err != nil {
			return readFailure(a, err)
		} else if n > 0 {
			return fail("wrote to stdout after an invalid initialization")
		}
		return exitedNonzero(a)
	case ExpectInitializedExit:
		if _, err := s.negotiate(a, r); err != nil {
			return err
		}
		a.send(sc.Bytes(r), sc.CloseStdin)
		if n, err := a.drain(true); err != nil {
			return readFailure(a, err)
		} else if n > 0 {
			return fail("wrote to stdout after the initialized frame although the execution was invalid")
		}
		return exitedNonzero(a)
	case ExpectLateReject:
		sess, err := s.negotiate(a, r)
		if err != nil {
			return err
		}
		if sc.Requires != "" && !sess.Negotiated(sc.Requires) {
			return errNotApplicable{sc.Requires}
		}
		data := sc.Bytes(r)
		if err := acceptOwn(sess, data, false); err != nil {
			return err
		}
		a.send(data, sc.CloseStdin)
		if err := readUntilEOF(a, sess); err != nil {
			return err
		}
		return exitedNonzero(a)
	case ExpectSession:
		return s.judgeSession(a, sc, r, ws)
	}
	return fail("unknown expectation")
}

// negotiate sends r's valid initialize frame and judges the initialized
// answer: a valid, compact frame for this id whose selection is a subset of
// the offer, names the mode's operation, and equals (apart from the id) the
// answer the plugin gave to the same offer before.
func (s *suite) negotiate(a *attempt, r *Request) (*plugin.Session, error) {
	sess, err := plugin.NewSession(r.ID)
	if err != nil {
		return nil, fail("suite error: %v", err)
	}
	init := r.initialize().line()
	if err := acceptOwn(sess, init, true); err != nil {
		return nil, err
	}
	a.send(init, false)
	line, err := a.readFrame()
	if errors.Is(err, io.EOF) {
		return nil, fail("stdout ended before the initialized frame%s", exitNote(a))
	}
	if err != nil {
		return nil, readFailure(a, err)
	}
	f, err := acceptPlugin(sess, line)
	if err != nil {
		return nil, fail("first frame: %v", err)
	}
	if f.Type != plugin.TypeInitialized {
		return nil, fail("first frame is %s, want initialized", f.Type)
	}
	if !sess.Negotiated(r.Operation.Capability()) {
		return nil, fail("selection lacks the %s capability", r.Operation)
	}
	key := offerKey(r.Offer)
	norm := bytes.ReplaceAll(line, []byte(r.ID), []byte(idPlaceholder))
	if ref, ok := s.initialized[key]; ok && !bytes.Equal(ref, norm) {
		return nil, fail("initialized frame differs from the plugin's earlier answer to the same offer")
	}
	s.initialized[key] = norm
	return sess, nil
}

const idPlaceholder = "<session-id>"

// acceptPlugin decodes a frame the plugin wrote and advances the session.
func acceptPlugin(sess *plugin.Session, line []byte) (plugin.Frame, error) {
	f, err := plugin.DecodePluginFrame(line)
	if err != nil {
		return plugin.Frame{}, err
	}
	if err := sess.Accept(f); err != nil {
		return plugin.Frame{}, err
	}
	return f, nil
}

// acceptOwn feeds the suite's own frames into the session. With all, every
// line must be a valid next frame (a suite self-check); otherwise lines are
// accepted up to the first one the protocol rejects, which must exist.
func acceptOwn(sess *plugin.Session, data string, all bool) error {
	lines := strings.SplitAfter(data, "\n")
	for i, l := range lines {
		if l == "" {
			continue
		}
		f, err := plugin.DecodeFrame([]byte(strings.TrimSuffix(l, "\n")))
		if err == nil {
			err = sess.Accept(f)
		}
		if err != nil {
			if all {
				return fail("suite error: own frame %d is invalid: %v", i+1, err)
			}
			return nil
		}
	}
	if all {
		return nil
	}
	return fail("suite error: the scenario holds no invalid frame")
}

// readUntilEOF judges every frame the plugin writes until stdout ends.
func readUntilEOF(a *attempt, sess *plugin.Session) error {
	for n := 2; ; n++ {
		line, err := a.readFrame()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return readFailure(a, err)
		}
		if _, err := acceptPlugin(sess, line); err != nil {
			return fail("frame %d: %v", n, err)
		}
	}
}

// readFailure explains an error reading stdout: the bound passed, or the
// plugin wrote something that is not a frame.
func readFailure(a *attempt, err error) error {
	switch {
	case a.expired():
		return errTimeout
	case a.wasLate():
		return errLate
	}
	var pe *plugin.ProtocolError
	if errors.As(err, &pe) {
		return fail("stdout: %v", err)
	}
	return fail("reading stdout failed")
}

var (
	errTimeout    = errors.New("timeout")
	errLate       = fmt.Errorf("no clean stdout EOF and exit within %d ms after stdin was closed", exitWindow.Milliseconds())
	errCancelLate = fmt.Errorf("no terminal frame, clean stdout EOF and exit within the %d ms the Worker allows after its cancel", exitWindow.Milliseconds())
)

// exitedNonzero requires the plugin to exit on its own with a nonzero code
// within the bound.
func exitedNonzero(a *attempt) error {
	if !a.waitExit() {
		return errTimeout
	}
	code, sig, _ := a.p.exitStatus()
	switch {
	case sig != 0:
		return fail("killed by signal %d instead of exiting nonzero", int(sig))
	case code == 0:
		return fail("exited 0 after invalid input")
	}
	return nil
}

// exitNote adds the exit status to a message once the plugin ended.
func exitNote(a *attempt) string {
	if !a.waitExit() {
		return ""
	}
	code, sig, _ := a.p.exitStatus()
	if sig != 0 {
		return fmt.Sprintf(" (killed by signal %d)", int(sig))
	}
	return fmt.Sprintf(" (exit %d)", code)
}

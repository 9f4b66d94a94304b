package conformance

import (
	"context"
	"errors"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
)

// hostOutputBytes is the combined stdout+stderr budget of the host-runner
// session: the default plugin_output_bytes of the shipped configuration.
const hostOutputBytes = 1 << 20

// judgeHostRun runs the valid request through pkg/plugin/host, the runner
// the Worker uses (under the Linux child-subreaper wrapper when
// Config.Reaper is set), and requires a successful outcome. Every frame the
// runner traces from the plugin is judged again here, so the verdict does
// not rest on the runner alone.
func (s *suite) judgeHostRun(ctx context.Context, r *Request, ws *workspace) error {
	var sess *plugin.Session
	var traceErr error
	frames := 0
	// The runner picks its own session id; the trace is judged against a
	// session opened with that id on the first frame.
	trace := func(dir host.Direction, frame []byte) {
		if traceErr != nil {
			return
		}
		f, err := plugin.DecodeFrame(frame)
		if err != nil {
			traceErr = fail("traced frame: %v", err)
			return
		}
		if sess == nil {
			if sess, err = plugin.NewSession(f.ID); err != nil {
				traceErr = fail("traced frame: %v", err)
				return
			}
		}
		frames++
		if dir == host.FromPlugin {
			_, err = acceptPlugin(sess, frame)
		} else {
			err = sess.Accept(f)
		}
		if err != nil {
			traceErr = fail("traced frame %d: %v", frames, err)
		}
	}
	cmd := host.Command{
		Path:        s.cfg.Command[0],
		Args:        s.cfg.Command[1:],
		Env:         s.cfg.Env,
		Reaper:      s.cfg.Reaper,
		OutputBytes: hostOutputBytes,
		Timeout:     s.cfg.Timeout,
		Trace:       trace,
	}
	req := host.Request{Offer: r.Offer, Operation: r.Operation}
	if r.Operation == plugin.OpText {
		req.Input = textInput
	} else {
		req.Workspace, req.Instruction, req.TimeoutMS = r.Workspace, r.Instruction, r.TimeoutMS
	}
	out, err := host.Run(ctx, cmd, req, nil)
	if err != nil {
		if host.KindOf(err) == host.KindTimeout {
			return errTimeout
		}
		var he *host.Error
		if errors.As(err, &he) {
			return fail("host runner: %v", he)
		}
		return fail("host runner failed")
	}
	if traceErr != nil {
		return traceErr
	}
	if sess == nil || !sess.Done() || sess.Terminal() != plugin.TypeResult {
		return fail("host runner succeeded but the traced session has no result frame")
	}
	if len(out.Selected) == 0 {
		return fail("host runner reported no negotiated capabilities")
	}
	if ws != nil {
		return ws.checkAfterSession(true)
	}
	return nil
}

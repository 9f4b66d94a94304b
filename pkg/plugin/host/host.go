package host

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// ExitWindow is how long the plugin has, after its terminal frame and the
// close of its stdin, to end stdout and exit 0; it is also the drain window
// after a cancel.
const ExitWindow = 250 * time.Millisecond

// Direction tells a Trace hook which way a frame went.
type Direction string

// The trace directions.
const (
	ToPlugin   Direction = "worker->plugin"
	FromPlugin Direction = "plugin->worker"
)

// Command is how to run the plugin for one operation.
type Command struct {
	Path string   // the plugin executable
	Args []string // arguments after the program name
	Env  []string // the plugin's complete environment
	Dir  string   // working directory; empty means the caller's
	// Reaper, when set, runs the plugin under one of the pool's Linux
	// child-subreaper wrappers (see supervise.ReaperPool); nil runs the
	// plugin directly.
	Reaper *supervise.ReaperPool
	// Sandbox, when set, is the Landlock policy the plugin starts in
	// (supervise.Command.Sandbox; it needs Reaper).
	Sandbox *sandbox.Policy
	// OutputBytes is the combined stdout+stderr budget
	// (plugin_output_bytes); it must be positive.
	OutputBytes int64
	// Timeout bounds the whole operation (plugin_timeout); zero is none.
	Timeout time.Duration
	// KillGrace is the SIGTERM-to-SIGKILL delay of cleanup; zero means
	// supervise.DefaultKillGrace.
	KillGrace time.Duration
	// Trace, when set, is called with every frame sent and every valid
	// frame received (JSON without the LF), in order, from Run's
	// goroutine. The bytes must not be retained or modified.
	Trace func(dir Direction, frame []byte)
}

// Request is the one operation to execute.
type Request struct {
	// Offer is the capability offer; it must include Operation.
	Offer     []plugin.Capability
	Operation plugin.Operation
	Input     string // text
	Workspace string // workspace_edit: absolute clean path
	// Instruction and TimeoutMS are for workspace_edit.
	Instruction string
	TimeoutMS   int64
}

// Progress is one validated progress frame.
type Progress struct {
	Sequence int64
	Stage    plugin.Stage
	Text     string
}

// Outcome is a successful operation's result.
type Outcome struct {
	Selected      []plugin.Capability // the negotiated capabilities
	Output        string              // text result
	CommitSubject *string             // workspace result, when sent
	Summary       *string             // agent report, when sent
	Changes       []string            // agent report, when sent
	Progress      int64               // progress frames accepted
}

// Run executes req in a fresh plugin process started from cmd. onProgress,
// if not nil, is called from Run's goroutine with each validated progress
// frame while the operation is live; it should return quickly. The error
// is an *Error; see the package documentation for the precedence rules.
func Run(ctx context.Context, cmd Command, req Request, onProgress func(Progress)) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, &Error{Kind: KindCancelled, Err: err}
	}
	if cmd.OutputBytes <= 0 {
		return Outcome{}, &Error{Kind: KindRequest, Reason: "output budget must be positive"}
	}
	id, err := plugin.NewID(nil)
	if err != nil {
		return Outcome{}, &Error{Kind: KindRequest, Reason: "session id", Err: err}
	}
	r := &runner{cmd: cmd, onProgress: onProgress}
	if err := r.prepare(id, req); err != nil {
		return Outcome{}, err
	}
	opCtx, cancelOp := ctx, context.CancelFunc(func() {})
	if cmd.Timeout > 0 {
		opCtx, cancelOp = context.WithTimeout(ctx, cmd.Timeout)
	}
	defer cancelOp()
	proc, err := supervise.Start(context.Background(), supervise.Command{
		Path:        cmd.Path,
		Args:        cmd.Args,
		Env:         cmd.Env,
		Dir:         cmd.Dir,
		Reaper:      cmd.Reaper,
		Sandbox:     cmd.Sandbox,
		OutputLimit: cmd.OutputBytes,
		KillGrace:   cmd.KillGrace,
	})
	if err != nil {
		return Outcome{}, &Error{Kind: KindSpawn, Err: err}
	}
	r.start(proc)
	out, err := r.exchange(opCtx)
	r.cleanup()
	_, reason := proc.Wait()
	switch {
	case errors.Is(reason, supervise.ErrSurvivors):
		return Outcome{}, &Error{Kind: KindSurvivors, Err: reason}
	case r.limitSelected:
		return Outcome{}, &Error{Kind: KindOutputLimit}
	case ctx.Err() != nil:
		return Outcome{}, &Error{Kind: KindCancelled, Err: ctx.Err()}
	case opCtx.Err() != nil:
		return Outcome{}, &Error{Kind: KindTimeout, Err: opCtx.Err()}
	case err == nil && r.lateTerminal && proc.StdoutHeld():
		// The terminal frame was read after the plugin had exited, and
		// a process it started held its stdout then: the frame may be
		// that process's, not the plugin's.
		return Outcome{}, violation("the terminal frame came after the plugin exited, from a stdout a process it left held", nil)
	}
	return out, err
}

// readResult is one frame, or the error that ended reading (io.EOF for a
// clean end of stdout).
type readResult struct {
	frame plugin.Frame
	raw   []byte
	err   error
}

type runner struct {
	cmd        Command
	onProgress func(Progress)
	sess       *plugin.Session
	op         plugin.Operation
	initialize []byte
	execute    []byte
	// executeFrame is accepted into the session just before it is sent.
	executeFrame plugin.Frame

	proc   *supervise.Process
	frames chan readResult
	writes chan []byte // nil entry closes stdin
	stop   chan struct{}

	exceeded      <-chan struct{} // nil once handled
	exited        <-chan struct{} // nil once seen
	eof           bool
	stdinClosed   bool
	limitSelected bool
	// lateTerminal: the terminal frame was read after the plugin had
	// exited (supervise.Process.Ended).
	lateTerminal bool
}

// prepare encodes (and so validates) the two frames the Worker sends.
func (r *runner) prepare(id string, req Request) error {
	if !slices.Contains(req.Offer, req.Operation.Capability()) {
		return &Error{Kind: KindRequest, Reason: "the offer lacks the operation's capability"}
	}
	init := plugin.Frame{ID: id, Type: plugin.TypeInitialize, Capabilities: slices.Clone(req.Offer), Limits: plugin.V1Limits()}
	exec := plugin.Frame{ID: id, Type: plugin.TypeExecute, Operation: req.Operation}
	switch req.Operation {
	case plugin.OpText:
		exec.Input = req.Input
	case plugin.OpWorkspaceEdit:
		exec.Workspace, exec.Instruction, exec.TimeoutMS = req.Workspace, req.Instruction, req.TimeoutMS
	}
	sess, err := plugin.NewSession(id)
	if err != nil {
		return &Error{Kind: KindRequest, Err: err}
	}
	if r.initialize, err = plugin.Encode(init); err != nil {
		return &Error{Kind: KindRequest, Reason: "initialize", Err: err}
	}
	if r.execute, err = plugin.Encode(exec); err != nil {
		return &Error{Kind: KindRequest, Reason: "execute", Err: err}
	}
	if err := sess.Accept(init); err != nil {
		return &Error{Kind: KindRequest, Err: err}
	}
	r.sess, r.op, r.executeFrame = sess, req.Operation, exec
	return nil
}

func (r *runner) start(proc *supervise.Process) {
	r.proc = proc
	r.frames = make(chan readResult)
	r.writes = make(chan []byte, 4) // initialize, execute, cancel, close
	r.stop = make(chan struct{})
	r.exceeded = proc.Exceeded()
	r.exited = proc.Done()
	go r.read()
	go r.write()
}

// read decodes stdout frames until the first error, which it also sends.
// Its buffer is small enough to stay a small heap object, which a Worker
// recycles cheaply session after session; larger frames (up to
// plugin.FrameBytes) are assembled from several reads by ReadFrame.
func (r *runner) read() {
	br := bufio.NewReaderSize(r.proc.Stdout(), 16*1024)
	for {
		var res readResult
		line, err := plugin.ReadFrame(br)
		if err == nil {
			res.raw = line
			res.frame, res.err = plugin.DecodePluginFrame(line)
		} else {
			res.err = err
		}
		select {
		case r.frames <- res:
		case <-r.stop:
			return
		}
		if res.err != nil {
			return
		}
	}
}

// write owns the plugin's stdin, so a plugin that does not read cannot
// block Run. After the first failed write it only waits for the close.
func (r *runner) write() {
	stdin := r.proc.Stdin()
	failed := false
	for b := range r.writes {
		if b == nil {
			stdin.Close()
			return
		}
		if !failed {
			_, err := stdin.Write(b)
			failed = err != nil // the plugin's reading side is gone; its output decides
		}
	}
}

func (r *runner) send(frame []byte) {
	if r.cmd.Trace != nil {
		r.cmd.Trace(ToPlugin, frame[:len(frame)-1])
	}
	r.writes <- frame
}

func (r *runner) closeStdin() {
	if !r.stdinClosed {
		r.stdinClosed = true
		r.writes <- nil
	}
}

// cleanup terminates whatever is left and waits until the plugin (and,
// with the wrapper, every descendant) has been reaped.
func (r *runner) cleanup() {
	r.proc.Terminate()
	<-r.proc.Done()
	close(r.stop)
	r.proc.Close()
	if !r.stdinClosed {
		r.stdinClosed = true
		close(r.writes)
	}
}

// event is what the exchange waits for next.
type event int

const (
	evFrame event = iota
	evReadErr
	evEOF
	evDone     // the context given to next ended
	evExceeded // output budget exceeded
	evExited   // the process has been reaped
	evTimer
)

func (r *runner) next(ctx context.Context, timer <-chan time.Time) (event, readResult) {
	select {
	case res := <-r.frames:
		switch {
		case res.err == nil:
			if r.cmd.Trace != nil {
				r.cmd.Trace(FromPlugin, res.raw)
			}
			return evFrame, res
		case errors.Is(res.err, io.EOF):
			r.eof = true
			return evEOF, res
		case errors.Is(res.err, supervise.ErrOutputLimit):
			r.exceeded = nil
			return evExceeded, res
		}
		return evReadErr, res
	case <-ctx.Done():
		return evDone, readResult{}
	case <-r.exceeded:
		r.exceeded = nil
		return evExceeded, readResult{}
	case <-r.exited:
		r.exited = nil
		return evExited, readResult{}
	case <-timer:
		return evTimer, readResult{}
	}
}

// overLimit handles an exceeded budget: it is selected as the outcome only
// while ctx is live, and the plugin is stopped either way.
func (r *runner) overLimit(ctx context.Context) {
	if ctx.Err() == nil {
		r.limitSelected = true
	}
	r.proc.Terminate()
}

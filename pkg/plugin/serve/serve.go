// Package serve is the plugin side of protocol v1 for Go plugins: it reads
// the Worker's frames strictly from stdin, negotiates deterministically,
// runs one handler for the execute frame, streams serialized progress, maps
// a Worker cancel onto the handler's context, writes exactly one terminal
// frame and then requires stdin to end.
//
// Exit contract for the calling main: Serve returns nil only after a
// complete, valid session (terminal frame written, stdin at EOF); main
// exits 0 then. Any other return means the session broke (invalid frame,
// I/O error) and main must exit nonzero. The stdout effects are those the
// protocol demands: an invalid or unusable initialize leaves stdout empty;
// an invalid execute leaves only the initialized frame; an invalid frame
// during execution stops all output before any terminal frame.
//
// A handler reports an unusable but well-formed request by returning
// Fail(plugin.CategoryInvalidRequest) (or another category); that is a
// valid session ending in a failure frame, and Serve returns nil.
package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Request is a validated execute frame plus the negotiation result.
type Request struct {
	ID          string
	Operation   plugin.Operation
	Input       string        // text
	Workspace   string        // workspace_edit: absolute clean path
	Instruction string        // workspace_edit
	Timeout     time.Duration // workspace_edit: from timeout_ms
	Selection   []plugin.Capability
}

// Negotiated reports whether c was selected for this session.
func (r Request) Negotiated(c plugin.Capability) bool { return slices.Contains(r.Selection, c) }

// Result is a successful outcome. For text, Output is the result. For
// workspace_edit, CommitSubject (when non-empty) and the report pair
// Summary+Changes (when non-empty) are sent only if their capability was
// negotiated and are dropped otherwise.
type Result struct {
	Output        string
	CommitSubject string
	Summary       string
	Changes       []string
}

// Failure is an error a handler returns to end the session with a failure
// frame of Category.
type Failure struct {
	Category plugin.Category
}

func (f *Failure) Error() string { return "plugin failure: " + string(f.Category) }

// Fail returns a *Failure for category c.
func Fail(c plugin.Category) error { return &Failure{Category: c} }

// Progress reports one progress frame. It is safe for concurrent use; calls
// are serialized and numbered in the order they are written. When progress
// was not negotiated it does nothing and returns nil. After the terminal
// frame, after ProgressFrames frames, or once the session broke it writes
// nothing and returns ErrProgressClosed. Invalid stage or text returns a
// *plugin.ProtocolError and writes nothing.
type Progress func(stage plugin.Stage, text string) error

// ErrProgressClosed is returned by Progress when no more progress may be sent.
var ErrProgressClosed = errors.New("serve: progress closed")

// Handler executes one request. A non-nil error ends the session with a
// failure frame: a *Failure's category, or execution_failed for any other
// error. When the Worker cancels, ctx is cancelled and the terminal frame is
// failure{cancelled} whatever the handler returns.
type Handler func(ctx context.Context, req Request) (Result, error)

// ProgressHandler is a Handler that may report progress.
type ProgressHandler func(ctx context.Context, req Request, progress Progress) (Result, error)

// CancelGrace bounds how long Serve waits for a cancelled handler to return
// before it answers failure{cancelled} on its own. The Worker allows 250 ms.
const CancelGrace = 150 * time.Millisecond

// Serve runs one session for a plugin supporting caps (operations and
// optional capabilities; "progress" is ignored, "cancel" is always
// supported). See the package documentation for the exit contract.
func Serve(ctx context.Context, stdin io.Reader, stdout io.Writer, caps []plugin.Capability, h Handler) error {
	if h == nil {
		return errors.New("serve: nil handler")
	}
	caps = slices.DeleteFunc(slices.Clone(caps), func(c plugin.Capability) bool { return c == plugin.CapProgress })
	return serve(ctx, stdin, stdout, caps, func(ctx context.Context, req Request, _ Progress) (Result, error) {
		return h(ctx, req)
	})
}

// ServeWithProgress is Serve for a handler that reports progress; it also
// supports the progress capability.
func ServeWithProgress(ctx context.Context, stdin io.Reader, stdout io.Writer, caps []plugin.Capability, h ProgressHandler) error {
	if h == nil {
		return errors.New("serve: nil handler")
	}
	return serve(ctx, stdin, stdout, append(slices.Clone(caps), plugin.CapProgress), h)
}

// conn is the shared state of one session: the state machine and stdout,
// guarded by mu so progress, cancel and the terminal frame serialize.
type conn struct {
	mu      sync.Mutex
	s       *plugin.Session
	out     io.Writer
	closed  bool // no more plugin frames may be written
	readErr error
}

func (c *conn) send(f plugin.Frame) error {
	if err := c.s.Accept(f); err != nil {
		return err
	}
	b, err := plugin.Encode(f)
	if err != nil {
		return err
	}
	if _, err := c.out.Write(b); err != nil {
		c.closed = true
		return fmt.Errorf("serve: write frame: %w", err)
	}
	return nil
}

func (c *conn) progress(stage plugin.Stage, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrProgressClosed
	}
	if !c.s.Negotiated(plugin.CapProgress) {
		return nil
	}
	if c.s.ProgressCount() >= plugin.ProgressFrames {
		return ErrProgressClosed
	}
	return c.send(plugin.Frame{ID: c.s.ID(), Type: plugin.TypeProgress, Sequence: c.s.NextSequence(), Stage: stage, Text: text})
}

func supportedCaps(caps []plugin.Capability) error {
	for _, c := range caps {
		if !c.Valid() {
			return errors.New("serve: unknown capability in plugin configuration")
		}
	}
	return nil
}

func readFrame(r *bufio.Reader) (plugin.Frame, error) {
	line, err := plugin.ReadFrame(r)
	if err != nil {
		if err == io.EOF {
			return plugin.Frame{}, &plugin.ProtocolError{Reason: "stdin ended before the expected frame"}
		}
		return plugin.Frame{}, err
	}
	return plugin.DecodeFrame(line)
}

type handlerDone struct {
	res Result
	err error
}

func serve(ctx context.Context, stdin io.Reader, stdout io.Writer, caps []plugin.Capability, h ProgressHandler) error {
	if err := supportedCaps(caps); err != nil {
		return err
	}
	caps = append(caps, plugin.CapCancel)
	in := bufio.NewReaderSize(stdin, 64<<10)

	// Negotiation: nothing reaches stdout unless initialize is valid and
	// names an operation this plugin supports.
	init, err := readFrame(in)
	if err != nil {
		return fmt.Errorf("read initialize: %w", err)
	}
	if init.Type != plugin.TypeInitialize {
		return fmt.Errorf("read initialize: %w", &plugin.ProtocolError{Reason: "first frame is not initialize"})
	}
	s, err := plugin.NewSession(init.ID)
	if err != nil {
		return err
	}
	if err := s.Accept(init); err != nil {
		return fmt.Errorf("read initialize: %w", err)
	}
	selection, ok := plugin.Select(s.Offer(), caps)
	if !ok {
		return errors.New("serve: the offer names no operation this plugin supports")
	}
	c := &conn{s: s, out: stdout}
	if err := c.send(plugin.Frame{ID: s.ID(), Type: plugin.TypeInitialized, Capabilities: selection}); err != nil {
		return err
	}

	exec, err := readFrame(in)
	if err == nil {
		err = s.Accept(exec)
	}
	if err != nil {
		return fmt.Errorf("read execute: %w", err)
	}
	req := Request{
		ID: s.ID(), Operation: exec.Operation, Input: exec.Input, Workspace: exec.Workspace,
		Instruction: exec.Instruction, Timeout: time.Duration(exec.TimeoutMS) * time.Millisecond,
		Selection: s.Selection(),
	}

	hctx, cancelHandler := context.WithCancel(ctx)
	defer cancelHandler()
	done := make(chan handlerDone, 1)
	go func() {
		res, err := h(hctx, req, c.progress)
		done <- handlerDone{res, err}
	}()

	// The reader watches stdin while the handler runs: a cancel cancels
	// the handler; anything else (another frame, EOF, garbage) is fatal.
	cancelled := make(chan struct{})
	broken := make(chan error, 1)
	afterTerminal := make(chan error, 1)
	go c.watch(in, cancelled, broken, afterTerminal)

	var hd handlerDone
	select {
	case hd = <-done:
	case err := <-broken:
		c.closeOutput()
		return err
	case <-cancelled:
		cancelHandler()
		grace := time.NewTimer(CancelGrace)
		select {
		case hd = <-done:
		case <-grace.C:
		case err := <-broken:
			grace.Stop()
			c.closeOutput()
			return err
		}
		grace.Stop()
	}
	if hd.err != nil && ctx.Err() != nil {
		// The plugin process itself is being stopped (a signal).
		hd.err = Fail(plugin.CategoryCancelled)
	}
	if err := c.finish(req, hd); err != nil {
		return err
	}
	select {
	case err := <-afterTerminal:
		return err
	case err := <-broken:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) closeOutput() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// watch reads Worker frames during and after execution. It reports a
// cancel on cancelled, a fatal error on broken, and, once the terminal
// frame is written, clean EOF (nil) or an error on afterTerminal.
func (c *conn) watch(in *bufio.Reader, cancelled chan<- struct{}, broken, afterTerminal chan<- error) {
	for {
		line, err := plugin.ReadFrame(in)
		var f plugin.Frame
		if err == nil {
			f, err = plugin.DecodeFrame(line)
		}
		c.mu.Lock()
		terminal := c.s.Done()
		switch {
		case err == io.EOF && terminal:
			c.mu.Unlock()
			afterTerminal <- nil
			return
		case err == io.EOF:
			err = &plugin.ProtocolError{Reason: "stdin ended before the terminal frame"}
		case err == nil && f.Type != plugin.TypeCancel:
			err = &plugin.ProtocolError{Reason: "unexpected frame from the Worker"}
		case err == nil:
			err = c.s.Accept(f)
		}
		if err != nil {
			c.closed = true
			c.mu.Unlock()
			if terminal {
				afterTerminal <- err
			} else {
				broken <- err
			}
			return
		}
		c.mu.Unlock()
		if !terminal {
			close(cancelled)
		}
	}
}

// finish writes the terminal frame for the handler's outcome, closing
// progress first.
func (c *conn) finish(req Request, hd handlerDone) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("serve: output closed before the terminal frame")
	}
	f := terminalFrame(c.s, req, hd)
	if err := c.send(f); err != nil {
		// An unsendable result (too long, bad subject) becomes a failure.
		var pe *plugin.ProtocolError
		if !errors.As(err, &pe) || f.Type != plugin.TypeResult {
			c.closed = true
			return err
		}
		err = c.send(plugin.Frame{ID: c.s.ID(), Type: plugin.TypeFailure, Category: plugin.CategoryExecutionFailed})
		if err != nil {
			c.closed = true
			return err
		}
	}
	c.closed = true
	return nil
}

func terminalFrame(s *plugin.Session, req Request, hd handlerDone) plugin.Frame {
	fail := func(cat plugin.Category) plugin.Frame {
		return plugin.Frame{ID: s.ID(), Type: plugin.TypeFailure, Category: cat}
	}
	if s.Cancelled() {
		return fail(plugin.CategoryCancelled)
	}
	if hd.err != nil {
		var f *Failure
		if errors.As(hd.err, &f) && f.Category.Valid() {
			return fail(f.Category)
		}
		return fail(plugin.CategoryExecutionFailed)
	}
	r := hd.res
	out := plugin.Frame{ID: s.ID(), Type: plugin.TypeResult}
	switch req.Operation {
	case plugin.OpText:
		out.Output = &r.Output
	case plugin.OpWorkspaceEdit:
		if r.CommitSubject != "" && s.Negotiated(plugin.CapCommitSubject) {
			out.CommitSubject = &r.CommitSubject
		}
		if (r.Summary != "" || len(r.Changes) > 0) && s.Negotiated(plugin.CapAgentReport) {
			out.Summary, out.Changes = &r.Summary, slices.Clone(r.Changes)
			if out.Changes == nil {
				out.Changes = []string{}
			}
		}
	}
	return out
}

package conformance

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Expect is what a scenario requires of the plugin.
type Expect int

const (
	// ExpectSilentExit: the initialization is invalid, so stdout stays empty
	// and the plugin exits nonzero within the bound.
	ExpectSilentExit Expect = iota
	// ExpectInitializedExit: initialization is valid and the execution is
	// invalid, so stdout holds exactly the deterministic initialized frame
	// and the plugin exits nonzero within the bound.
	ExpectInitializedExit
	// ExpectLateReject: a complete valid execute is followed by a frame
	// that breaks the order. The plugin may already have answered the
	// execute with one valid terminal frame, but it must then write
	// nothing more and exit nonzero within the bound.
	ExpectLateReject
	// ExpectSession: a valid session judged frame by frame, ending with one
	// terminal frame, clean stdout EOF and exit 0 within 250 ms after
	// stdin is closed.
	ExpectSession
	// ExpectHostRun: the valid request run through pkg/plugin/host, the
	// Worker's own runner, must succeed with a result. The runner builds
	// its own frames; Bytes is the equivalent execute frame.
	ExpectHostRun
)

func (e Expect) String() string {
	switch e {
	case ExpectSilentExit:
		return "no stdout, nonzero exit"
	case ExpectInitializedExit:
		return "initialized only, nonzero exit"
	case ExpectLateReject:
		return "initialized, at most one terminal frame, nonzero exit"
	case ExpectSession:
		return "valid session, exit 0"
	case ExpectHostRun:
		return "valid session through the Worker's runner"
	}
	return "unknown"
}

// Scenario is one fresh-process conformance check.
type Scenario struct {
	// Name is unique within a suite; it is what PASS/FAIL lines print.
	Name string
	// Class is the protocol rule family the scenario exercises.
	Class string
	// Expect is the required behaviour.
	Expect Expect
	// Offer, when set, replaces the mode's offer in the initialize frame.
	Offer []plugin.Capability
	// Bytes returns what is written to stdin: everything for
	// ExpectSilentExit, everything after the initialized frame otherwise
	// (for ExpectSession, the execute frame and what follows it, each a
	// valid frame).
	Bytes func(r *Request) string
	// CloseStdin closes stdin right after Bytes were written. Otherwise
	// stdin stays open until the plugin exits or the bound passes (for
	// ExpectSession, until the terminal frame arrived).
	CloseStdin bool
	// AllowFailure lets a session end with a failure frame instead of a
	// result.
	AllowFailure bool
	// CancelWindow marks an ExpectSession whose Bytes end with a cancel
	// frame: the terminal frame, clean stdout EOF and exit 0 must all come
	// within 250 ms (host.ExitWindow) of sending it, the drain window the
	// Worker allows before it terminates the plugin.
	CancelWindow bool
	// Requires names a capability the plugin must have selected for the
	// scenario to apply; without it the scenario passes as not applicable.
	Requires plugin.Capability
}

// Request carries the values one scenario run uses to build its bytes.
type Request struct {
	ID          string
	Operation   plugin.Operation
	Offer       []plugin.Capability
	Workspace   string // workspace_edit mode only; an absolute clean path
	Instruction string // workspace_edit mode only
	TimeoutMS   int64  // workspace_edit mode only
}

// Initialize returns the valid initialize frame of r.
func (r *Request) initialize() object {
	return header(r.ID, plugin.TypeInitialize).
		set("capabilities", caps(r.Offer...)).
		set("limits", limitsObject().json())
}

// execute returns the valid execute frame of r for its operation.
func (r *Request) execute() object {
	return r.executeOp(r.Operation)
}

func (r *Request) executeOp(op plugin.Operation) object {
	e := header(r.ID, plugin.TypeExecute).set("operation", str(string(op)))
	if op == plugin.OpText {
		return e.set("input", str(textInput))
	}
	return e.set("workspace", str(r.Workspace)).
		set("instruction", str(r.Instruction)).
		set("timeout_ms", num(r.TimeoutMS))
}

// payloadKey is the free-text field of r's execute frame.
func (r *Request) payloadKey() string {
	if r.Operation == plugin.OpText {
		return "input"
	}
	return "instruction"
}

// withPayload returns r's execute frame with its free-text field replaced
// by a raw JSON value.
func (r *Request) withPayload(raw string) object {
	return r.execute().set(r.payloadKey(), raw)
}

// textInput is the input of the valid text session.
const textInput = "hello conformance"

// DefaultOffer is the offer of the valid session for an operation: the
// operation with every optional capability it can use.
func DefaultOffer(op plugin.Operation) []plugin.Capability {
	if op == plugin.OpText {
		return []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel}
	}
	return []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapProgress, plugin.CapCancel,
		plugin.CapCommitSubject, plugin.CapAgentReport}
}

// otherOperation is the operation the mode does not run.
func otherOperation(op plugin.Operation) plugin.Operation {
	if op == plugin.OpText {
		return plugin.OpWorkspaceEdit
	}
	return plugin.OpText
}

// Classes lists the scenario classes in report order.
func Classes() []string {
	return []string{"session", "framing", "id", "field", "type", "capability", "limits",
		"version", "operation", "payload", "order"}
}

// offerKey identifies an offer for comparing initialized frames.
func offerKey(offer []plugin.Capability) string {
	parts := make([]string, len(offer))
	for i, c := range offer {
		parts[i] = string(c)
	}
	return strings.Join(parts, ",")
}

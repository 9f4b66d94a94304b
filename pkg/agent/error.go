package agent

import (
	"errors"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Class says what a failed run means for the attempt.
type Class int

// Failure classes.
const (
	// ClassFailed: the agent ran and did not finish the work (a nonzero
	// exit, a timeout, a failed turn, a malformed or broken stream). Running
	// it again may succeed: protocol category execution_failed.
	ClassFailed Class = iota
	// ClassMisconfigured: the agent cannot work in this environment (its
	// executable is missing, the operator profile is invalid, the Worker
	// offers no model gateway for it, the provider refused the credentials). Running
	// it again cannot help: protocol category incompatible, which the
	// Worker reports as the terminal plugin_incompatible.
	ClassMisconfigured
	// ClassRequest: the request itself is unusable (the workspace is not a
	// directory): invalid_request.
	ClassRequest
	// ClassCancelled: the caller's context ended: cancelled.
	ClassCancelled
)

// Reason is a fixed, value-free description of why a run failed.
type Reason string

// Failure reasons shared by every adapter. An adapter may add its own with
// NewError.
const (
	ReasonWorkspace       Reason = "workspace is not a directory"
	ReasonUnavailable     Reason = "agent executable not found"
	ReasonStart           Reason = "agent could not be started"
	ReasonSetup           Reason = "private run directory could not be prepared"
	ReasonProfile         Reason = "operator profile is invalid"
	ReasonAuthRefused     Reason = "provider refused the credentials"
	ReasonExit            Reason = "agent exited unsuccessfully"
	ReasonTimeout         Reason = "agent timed out"
	ReasonOutputLimit     Reason = "agent output exceeded its budget"
	ReasonMalformedEvents Reason = "agent event stream malformed"
	ReasonUnexpectedEvent Reason = "agent event stream broke the completion rules"
	ReasonProviderFailed  Reason = "agent reported a failed turn"
	ReasonNoCompletion    Reason = "agent ended without completing its turn"
	ReasonCancelled       Reason = "agent run cancelled"
)

// classOf is the class of every shared reason.
func classOf(r Reason) Class {
	switch r {
	case ReasonWorkspace:
		return ClassRequest
	case ReasonUnavailable, ReasonStart, ReasonProfile, ReasonAuthRefused:
		return ClassMisconfigured
	case ReasonCancelled:
		return ClassCancelled
	}
	return ClassFailed
}

// Error is a failed run. Its text is the agent's name and the fixed reason
// only: no path, argv, output or secret. Tail, when set, is the bounded,
// redacted end of the agent's raw event stream, for local diagnosis only.
type Error struct {
	Agent  string
	Reason Reason
	Class  Class
	Tail   []byte
}

// NewError returns the error for a shared reason, with its class.
func NewError(agent string, r Reason) *Error {
	return &Error{Agent: agent, Reason: r, Class: classOf(r)}
}

func (e *Error) Error() string { return e.Agent + ": " + string(e.Reason) }

// Category maps the failure onto a protocol v1 failure category.
func (e *Error) Category() plugin.Category {
	switch e.Class {
	case ClassRequest:
		return plugin.CategoryInvalidRequest
	case ClassMisconfigured:
		return plugin.CategoryIncompatible
	case ClassCancelled:
		return plugin.CategoryCancelled
	}
	return plugin.CategoryExecutionFailed
}

// CategoryOf returns the failure category of any error a run returned.
func CategoryOf(err error) plugin.Category {
	var e *Error
	if errors.As(err, &e) {
		return e.Category()
	}
	return plugin.CategoryExecutionFailed
}

// ReasonOf returns the reason of a run error ("" for nil or another error).
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

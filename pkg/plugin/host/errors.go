package host

import (
	"errors"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Kind classifies why Run did not return a result.
type Kind int

// The outcome kinds.
const (
	// KindRequest: the caller's request or command cannot be sent; nothing
	// was started.
	KindRequest Kind = iota + 1
	// KindSpawn: the plugin process could not be started.
	KindSpawn
	// KindProtocol: the plugin broke protocol v1 (invalid or misplaced
	// frame, trailing output, early end, nonzero exit, slow exit).
	KindProtocol
	// KindFailure: the plugin answered with a failure frame; see Category.
	KindFailure
	// KindTimeout: Command.Timeout elapsed.
	KindTimeout
	// KindCancelled: the caller's context ended.
	KindCancelled
	// KindOutputLimit: stdout and stderr together exceeded the budget.
	KindOutputLimit
	// KindSurvivors: processes the plugin started were still there after
	// its cgroup's kill (supervise.ErrSurvivors): what they can reach is
	// not to be touched. It wins over every other kind.
	KindSurvivors
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "invalid request"
	case KindSpawn:
		return "spawn failure"
	case KindProtocol:
		return "protocol violation"
	case KindFailure:
		return "plugin failure"
	case KindTimeout:
		return "timeout"
	case KindCancelled:
		return "cancelled"
	case KindOutputLimit:
		return "output limit exceeded"
	case KindSurvivors:
		return "processes survived"
	}
	return "unknown"
}

// Error is the error Run returns. Reason is a fixed text; Err, when set, is
// a value-free cause (a *plugin.ProtocolError, a *supervise.StartError, a
// context error).
type Error struct {
	Kind     Kind
	Category plugin.Category // the failure category, for KindFailure
	Reason   string
	Err      error
}

func (e *Error) Error() string {
	msg := "plugin " + e.Kind.String()
	if e.Kind == KindFailure {
		msg += ": " + string(e.Category)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of an error returned by Run, or 0.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

func violation(reason string, err error) *Error {
	return &Error{Kind: KindProtocol, Reason: reason, Err: err}
}

package plugin

import (
	"slices"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

type phase int

const (
	phaseNew        phase = iota // expects initialize
	phaseOffered                 // expects initialized
	phaseNegotiated              // expects execute
	phaseExecuting               // expects progress, cancel, result, failure
	phaseDone                    // terminal frame seen
)

// Session is the v1 state machine for one plugin invocation. Both ends feed
// it every frame they send and every frame they receive, in order; Accept
// decides whether the frame may come next and then advances. A Session is
// not safe for concurrent use.
type Session struct {
	id        string
	phase     phase
	offer     []Capability
	selection []Capability
	operation Operation
	progress  int64
	cancelled bool
	terminal  Type
}

// NewSession returns the state machine for session id, which must be a
// lowercase 32-hex id.
func NewSession(id string) (*Session, error) {
	if !ident.ValidHexID(id) {
		return nil, invalid("id is not 32 lowercase hex digits")
	}
	return &Session{id: id}, nil
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Offer returns the Worker's offered capabilities (nil before initialize).
func (s *Session) Offer() []Capability { return slices.Clone(s.offer) }

// Selection returns the negotiated capabilities (nil before initialized).
func (s *Session) Selection() []Capability { return slices.Clone(s.selection) }

// Negotiated reports whether c was selected by the plugin.
func (s *Session) Negotiated(c Capability) bool { return slices.Contains(s.selection, c) }

// Operation returns the execute frame's operation ("" before execute).
func (s *Session) Operation() Operation { return s.operation }

// ProgressCount returns how many progress frames were accepted.
func (s *Session) ProgressCount() int64 { return s.progress }

// NextSequence returns the sequence number the next progress frame must carry.
func (s *Session) NextSequence() int64 { return s.progress + 1 }

// Executing reports whether execute was accepted and no terminal frame yet.
func (s *Session) Executing() bool { return s.phase == phaseExecuting }

// Done reports whether the terminal frame was accepted.
func (s *Session) Done() bool { return s.phase == phaseDone }

// Terminal returns the type of the accepted terminal frame ("" before).
func (s *Session) Terminal() Type { return s.terminal }

// Cancelled reports whether a cancel frame was accepted.
func (s *Session) Cancelled() bool { return s.cancelled }

// Accept validates f as the next frame of the session (Frame.Validate plus
// id, order, negotiation and progress numbering) and advances the state. On
// error the session is unchanged; the caller must treat the error as fatal.
func (s *Session) Accept(f Frame) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.ID != s.id {
		return invalid("id does not match the session")
	}
	switch f.Type {
	case TypeInitialize:
		if s.phase != phaseNew {
			return invalid("initialize out of order")
		}
		s.offer = slices.Clone(f.Capabilities)
		s.phase = phaseOffered
	case TypeInitialized:
		if s.phase != phaseOffered {
			return invalid("initialized out of order")
		}
		for _, c := range f.Capabilities {
			if !slices.Contains(s.offer, c) {
				return invalid("selection names a capability that was not offered")
			}
		}
		s.selection = slices.Clone(f.Capabilities)
		s.phase = phaseNegotiated
	case TypeExecute:
		if s.phase != phaseNegotiated {
			return invalid("execute out of order")
		}
		if !s.Negotiated(f.Operation.Capability()) {
			return invalid("operation was not negotiated")
		}
		s.operation = f.Operation
		s.phase = phaseExecuting
	case TypeProgress:
		if s.phase != phaseExecuting {
			return invalid("progress out of order")
		}
		if !s.Negotiated(CapProgress) {
			return invalid("progress was not negotiated")
		}
		if f.Sequence != s.progress+1 {
			return invalid("progress sequence is not consecutive")
		}
		s.progress++
	case TypeCancel:
		if s.phase != phaseExecuting && s.phase != phaseDone {
			return invalid("cancel out of order")
		}
		if !s.Negotiated(CapCancel) {
			return invalid("cancel was not negotiated")
		}
		if s.cancelled {
			return invalid("second cancel")
		}
		s.cancelled = true
	case TypeResult:
		if s.phase != phaseExecuting {
			return invalid("result out of order")
		}
		if err := s.checkResult(&f); err != nil {
			return err
		}
		s.terminal, s.phase = f.Type, phaseDone
	case TypeFailure:
		if s.phase != phaseExecuting {
			return invalid("failure out of order")
		}
		s.terminal, s.phase = f.Type, phaseDone
	}
	return nil
}

func (s *Session) checkResult(f *Frame) error {
	switch s.operation {
	case OpText:
		if f.Output == nil {
			return invalid("text result lacks output")
		}
	case OpWorkspaceEdit:
		if f.Output != nil {
			return invalid("workspace result carries output")
		}
		if f.CommitSubject != nil && !s.Negotiated(CapCommitSubject) {
			return invalid("commit_subject was not negotiated")
		}
		if (f.Summary != nil || f.Changes != nil) && !s.Negotiated(CapAgentReport) {
			return invalid("agent report was not negotiated")
		}
	}
	return nil
}

// Select returns the capabilities a plugin supporting supported should
// select from offer: every offered capability it supports, in canonical
// order, without duplicates. It reports false when the result names no
// operation, in which case the plugin cannot take part in the session.
func Select(offer, supported []Capability) ([]Capability, bool) {
	var out []Capability
	op := false
	for _, c := range Capabilities() {
		if slices.Contains(offer, c) && slices.Contains(supported, c) {
			out = append(out, c)
			op = op || c == CapText || c == CapWorkspaceEdit
		}
	}
	return out, op
}

package plugin

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
)

// Version is the only protocol version this package speaks.
const Version = "v1"

// The v1 limits, fixed by the protocol. Sizes count UTF-8 bytes.
const (
	FrameBytes         = 1048576 // JSON bytes of one frame, not counting the LF
	ProgressFrames     = 128     // progress frames per session
	TextBytes          = 65536   // text input and text output
	ProgressTextBytes  = 1024    // progress text
	CommitSubjectBytes = 256     // commit_subject
)

// Agent report bounds (protocol v1).
const (
	SummaryBytes = 1024 // agent report summary
	ChangeBytes  = 256  // each agent report change
	MaxChanges   = 12   // changes per report
)

// Bounds this project chose where the protocol text gives none.
const (
	// InstructionBytes bounds a workspace_edit instruction.
	InstructionBytes = 65536
	// MaxTimeoutMS bounds execute.timeout_ms (24 hours).
	MaxTimeoutMS = 86_400_000
	// WorkspaceBytes bounds the workspace path.
	WorkspaceBytes = 4096
)

// Limits is the limits object of the initialize frame.
type Limits struct {
	FrameBytes         int64 `json:"frame_bytes"`
	ProgressFrames     int64 `json:"progress_frames"`
	TextBytes          int64 `json:"text_bytes"`
	ProgressTextBytes  int64 `json:"progress_text_bytes"`
	CommitSubjectBytes int64 `json:"commit_subject_bytes"`
}

// V1Limits returns the limits every v1 initialize frame must carry.
func V1Limits() Limits {
	return Limits{
		FrameBytes:         FrameBytes,
		ProgressFrames:     ProgressFrames,
		TextBytes:          TextBytes,
		ProgressTextBytes:  ProgressTextBytes,
		CommitSubjectBytes: CommitSubjectBytes,
	}
}

// Type is a frame's type.
type Type string

// The frame types.
const (
	TypeInitialize  Type = "initialize"
	TypeInitialized Type = "initialized"
	TypeExecute     Type = "execute"
	TypeProgress    Type = "progress"
	TypeResult      Type = "result"
	TypeFailure     Type = "failure"
	TypeCancel      Type = "cancel"
)

// FromWorker reports whether frames of type t are sent by the Worker
// (initialize, execute, cancel) rather than by the plugin.
func (t Type) FromWorker() bool {
	return t == TypeInitialize || t == TypeExecute || t == TypeCancel
}

// Terminal reports whether t ends the plugin's side of a session.
func (t Type) Terminal() bool { return t == TypeResult || t == TypeFailure }

func (t Type) valid() bool {
	switch t {
	case TypeInitialize, TypeInitialized, TypeExecute, TypeProgress, TypeResult, TypeFailure, TypeCancel:
		return true
	}
	return false
}

// Capability is a member of the closed v1 capability set.
type Capability string

// The v1 capabilities, in canonical order.
const (
	CapText          Capability = "text"
	CapWorkspaceEdit Capability = "workspace_edit"
	CapProgress      Capability = "progress"
	CapCancel        Capability = "cancel"
	CapCommitSubject Capability = "commit_subject"
	CapAgentReport   Capability = "agent_report"
)

// Capabilities returns the closed capability set in canonical order.
func Capabilities() []Capability {
	return []Capability{CapText, CapWorkspaceEdit, CapProgress, CapCancel, CapCommitSubject, CapAgentReport}
}

func (c Capability) rank() int {
	for i, k := range Capabilities() {
		if k == c {
			return i
		}
	}
	return -1
}

// Valid reports whether c is in the closed capability set.
func (c Capability) Valid() bool { return c.rank() >= 0 }

// Operation is what an execute frame asks for. Each operation is also the
// capability that must be negotiated for it.
type Operation string

// The v1 operations.
const (
	OpText          Operation = "text"
	OpWorkspaceEdit Operation = "workspace_edit"
)

// Valid reports whether o is a v1 operation.
func (o Operation) Valid() bool { return o == OpText || o == OpWorkspaceEdit }

// Capability returns the capability that enables o.
func (o Operation) Capability() Capability { return Capability(o) }

// Stage is a progress stage.
type Stage string

// The v1 progress stages.
const (
	StageStarted    Stage = "started"
	StageWorking    Stage = "working"
	StageFinalizing Stage = "finalizing"
)

// Valid reports whether s is a v1 stage.
func (s Stage) Valid() bool {
	return s == StageStarted || s == StageWorking || s == StageFinalizing
}

// Category is a failure category.
type Category string

// The v1 failure categories.
const (
	CategoryInvalidRequest  Category = "invalid_request"
	CategoryIncompatible    Category = "incompatible"
	CategoryExecutionFailed Category = "execution_failed"
	CategoryCancelled       Category = "cancelled"
)

// Valid reports whether c is a v1 failure category.
func (c Category) Valid() bool {
	switch c {
	case CategoryInvalidRequest, CategoryIncompatible, CategoryExecutionFailed, CategoryCancelled:
		return true
	}
	return false
}

// ProtocolError reports a violation of the protocol. Reason is a fixed text,
// possibly with JSON field names; it never contains frame content.
type ProtocolError struct {
	Reason string
}

func (e *ProtocolError) Error() string { return "plugin protocol: " + e.Reason }

func invalid(format string, args ...any) error {
	return &ProtocolError{Reason: fmt.Sprintf(format, args...)}
}

// NewID reads 16 bytes from random (crypto/rand.Reader when nil) and returns
// them as a session id.
func NewID(random io.Reader) (string, error) {
	if random == nil {
		random = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("new session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

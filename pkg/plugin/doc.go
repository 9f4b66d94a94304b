// Package plugin is the contract of Agent Forge plugin protocol v1: frame
// types, the bounded frame reader, the strict decoder, the canonical
// encoder, every value rule, and the session state machine. Both ends import
// it: the Worker-side runner (pkg/plugin/host), the Go plugin SDK
// (pkg/plugin/serve) and the conformance suite (pkg/plugin/conformance).
//
// # Transport
//
// A plugin is a fresh process per operation. The Worker writes frames to the
// plugin's stdin; the plugin writes frames to stdout. Stderr is private
// diagnostics and never part of the protocol. A frame is one compact JSON
// object in valid UTF-8 followed by a single LF. The JSON text is at most
// FrameBytes (1 MiB) bytes, not counting the LF. Blank lines, CR anywhere
// (so CRLF too), insignificant whitespace, malformed JSON, invalid UTF-8 or
// lone surrogate escapes, duplicate, unknown or case-variant keys, null
// values, oversized frames and a last frame without its LF are invalid.
// ReadFrame enforces the line rules; DecodeFrame the JSON rules and the
// exact field set of each frame type.
//
// # Session
//
// Every frame carries exactly version ("v1"), id (the lowercase 32-hex
// session id the Worker chose) and type, plus exactly the fields of its
// type. A session runs in this order (W = Worker, P = plugin):
//
//	W→P initialize  {capabilities, limits}   the offer and the v1 limits
//	P→W initialized {capabilities}           the selection
//	W→P execute     {operation, ...}         exactly one
//	P→W progress    {sequence, stage, text}  zero or more, if negotiated
//	W→P cancel      {}                       at most one, if negotiated
//	P→W result | failure                     exactly one terminal frame
//	W   closes stdin; P exits 0 with nothing more on stdout
//
// The offer is a non-empty, duplicate-free list from the closed capability
// set that names at least one operation; limits equal V1Limits exactly. The
// selection is a duplicate-free subset of the offer that names at least one
// operation, and the execute's operation must be selected. Only the Worker
// sends initialize, execute and cancel; only the plugin sends initialized,
// progress, result and failure.
//
// Execute for "text" carries input; for "workspace_edit" it carries
// workspace (absolute, clean), instruction (non-empty) and timeout_ms
// (positive, at most MaxTimeoutMS). A text result carries output. A
// workspace result carries optionally commit_subject (only if selected) and
// optionally the agent report pair summary+changes (only if agent_report
// was selected, both or neither). Progress, if selected, numbers its frames
// 1, 2, 3, ... up to ProgressFrames. Failure names one of the four
// categories.
//
// # Limits
//
// The v1 limits are fixed and initialize.limits must equal V1Limits
// exactly: frame_bytes 1048576 (JSON bytes, LF not counted),
// progress_frames 128, text_bytes 65536 (text input and output),
// progress_text_bytes 1024, commit_subject_bytes 256. The agent report
// allows a summary of SummaryBytes and 1..MaxChanges changes of ChangeBytes
// each. Where the protocol names no bound this package chooses one:
// InstructionBytes, WorkspaceBytes and MaxTimeoutMS. All sizes are UTF-8
// bytes.
//
// Cancel may cross the plugin's terminal frame in flight: a Session accepts
// one cancel before or after the terminal frame, and the plugin may still
// finish with any terminal frame after a cancel (the Worker treats its own
// cancellation as authoritative).
//
// # Invalid versus failed
//
// A frame that breaks any rule above is invalid, and invalidity is fatal to
// the session. A plugin that receives an invalid frame writes nothing more
// to stdout and exits nonzero: an invalid initialize leaves stdout empty,
// an invalid execute leaves only the initialized frame. A Worker that
// receives an invalid frame, trailing bytes after the terminal frame, or a
// nonzero exit counts a protocol failure. A valid request that the plugin
// cannot carry out is not invalid: the plugin answers with a failure frame
// (invalid_request for a well-formed but unusable request, incompatible,
// execution_failed or cancelled) and exits 0.
//
// Errors from this package are *ProtocolError values whose reasons are fixed
// texts and JSON field paths; they never contain frame content.
package plugin

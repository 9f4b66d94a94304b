package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// ReadFrame reads one frame line from r and returns its JSON bytes without
// the LF. It never buffers more than FrameBytes+1 bytes of one line. It
// returns io.EOF, unwrapped, when r ends cleanly before any byte of a new
// line; every other failure is a *ProtocolError (or the reader's own error).
//
// Line rules: at most FrameBytes bytes before the LF, LF-terminated, not
// blank, no CR anywhere, valid UTF-8.
func ReadFrame(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		// Only what has arrived is examined, so a line that passed the
		// limit is refused at once, not when more input (or EOF) comes.
		if r.Buffered() == 0 {
			if _, err := r.Peek(1); err != nil {
				if !errors.Is(err, io.EOF) {
					return nil, err
				}
				if len(line) == 0 {
					return nil, io.EOF
				}
				return nil, invalid("final frame lacks its LF")
			}
		}
		buf, _ := r.Peek(r.Buffered())
		end := bytes.IndexByte(buf, '\n')
		n := end + 1
		if end < 0 {
			n = len(buf)
		}
		if len(line)+n > FrameBytes+1 || (end < 0 && len(line)+n == FrameBytes+1) {
			return nil, invalid("frame exceeds %d bytes", FrameBytes)
		}
		line = append(line, buf[:n]...)
		r.Discard(n)
		if end >= 0 {
			break
		}
	}
	line = line[:len(line)-1]
	if len(line) == 0 {
		return nil, invalid("blank line")
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, invalid("carriage return in frame")
	}
	if !utf8.Valid(line) {
		return nil, invalid("frame is not valid UTF-8")
	}
	return line, nil
}

// wireFrame is the JSON shape of every frame, fields in canonical order.
// Pointers make presence visible; strictjson rejects null, so a non-nil
// pointer means the key was present with a value of the right JSON type.
type wireFrame struct {
	Version       *string     `json:"version,omitempty"`
	ID            *string     `json:"id,omitempty"`
	Type          *string     `json:"type,omitempty"`
	Capabilities  *[]string   `json:"capabilities,omitempty"`
	Limits        *wireLimits `json:"limits,omitempty"`
	Operation     *string     `json:"operation,omitempty"`
	Input         *string     `json:"input,omitempty"`
	Workspace     *string     `json:"workspace,omitempty"`
	Instruction   *string     `json:"instruction,omitempty"`
	TimeoutMS     *int64      `json:"timeout_ms,omitempty"`
	Sequence      *int64      `json:"sequence,omitempty"`
	Stage         *string     `json:"stage,omitempty"`
	Text          *string     `json:"text,omitempty"`
	Output        *string     `json:"output,omitempty"`
	CommitSubject *string     `json:"commit_subject,omitempty"`
	Summary       *string     `json:"summary,omitempty"`
	Changes       *[]string   `json:"changes,omitempty"`
	Category      *string     `json:"category,omitempty"`
}

type wireLimits struct {
	FrameBytes         *int64 `json:"frame_bytes,omitempty"`
	ProgressFrames     *int64 `json:"progress_frames,omitempty"`
	TextBytes          *int64 `json:"text_bytes,omitempty"`
	ProgressTextBytes  *int64 `json:"progress_text_bytes,omitempty"`
	CommitSubjectBytes *int64 `json:"commit_subject_bytes,omitempty"`
}

func (w *wireFrame) present() int {
	m := 0
	set := func(ok bool, bit int) {
		if ok {
			m |= bit
		}
	}
	set(w.Capabilities != nil, fCapabilities)
	set(w.Limits != nil, fLimits)
	set(w.Operation != nil, fOperation)
	set(w.Input != nil, fInput)
	set(w.Workspace != nil, fWorkspace)
	set(w.Instruction != nil, fInstruction)
	set(w.TimeoutMS != nil, fTimeoutMS)
	set(w.Sequence != nil, fSequence)
	set(w.Stage != nil, fStage)
	set(w.Text != nil, fText)
	set(w.Output != nil, fOutput)
	set(w.CommitSubject != nil, fCommitSubject)
	set(w.Summary != nil, fSummary)
	set(w.Changes != nil, fChanges)
	set(w.Category != nil, fCategory)
	return m
}

// DecodeFrame decodes one frame line (without its LF, as ReadFrame returns
// it) and checks every session-independent rule: compact form, strict JSON,
// version, id format, type, the exact field set of the type, and each
// value (see Frame.Validate). On error it returns the zero Frame.
func DecodeFrame(line []byte) (Frame, error) {
	if len(line) > FrameBytes {
		return Frame{}, invalid("frame exceeds %d bytes", FrameBytes)
	}
	if len(line) == 0 {
		return Frame{}, invalid("blank line")
	}
	if line[0] != '{' {
		return Frame{}, invalid("frame is not a JSON object")
	}
	if !compact(line) {
		return Frame{}, invalid("frame is not compact JSON")
	}
	w, err := decodeWire(line)
	if err != nil {
		return Frame{}, err
	}
	if w.Version == nil || w.ID == nil || w.Type == nil {
		return Frame{}, invalid("frame lacks version, id or type")
	}
	if *w.Version != Version {
		return Frame{}, invalid("unsupported version")
	}
	if !ident.ValidHexID(*w.ID) {
		return Frame{}, invalid("id is not 32 lowercase hex digits")
	}
	t := Type(*w.Type)
	if !t.valid() {
		return Frame{}, invalid("unknown frame type")
	}
	if err := exactFields(t, &w); err != nil {
		return Frame{}, err
	}
	f := fromWire(t, &w)
	if err := f.Validate(); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// decodeWire strictly decodes a frame's JSON, which compact has accepted
// (no whitespace outside strings): strictjson decides what is
// acceptable, then extractFrame copies the values out of the checked
// document. The result equals strictjson.Decode's (see the tests).
func decodeWire(line []byte) (wireFrame, error) {
	var w wireFrame
	if err := strictjson.Check(line, wireFrameType); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return w, invalid("%s", se.Error())
		}
		return w, invalid("malformed JSON")
	}
	if !extractFrame(line, &w) {
		return wireFrame{}, invalid("malformed JSON")
	}
	return w, nil
}

// compact reports whether line has no JSON whitespace outside strings. For
// valid JSON (strictjson checks that next) this equals "line is its own
// json.Compact form" but costs one pass without allocation.
func compact(line []byte) bool {
	inString := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// exactFields checks the wire frame carries exactly the keys of its type.
func exactFields(t Type, w *wireFrame) error {
	got := w.present()
	var want []int // acceptable exact sets
	switch t {
	case TypeInitialize:
		want = []int{fCapabilities | fLimits}
		if w.Limits != nil {
			l := w.Limits
			if l.FrameBytes == nil || l.ProgressFrames == nil || l.TextBytes == nil ||
				l.ProgressTextBytes == nil || l.CommitSubjectBytes == nil {
				return invalid("limits lack a v1 limit")
			}
		}
	case TypeInitialized:
		want = []int{fCapabilities}
	case TypeExecute:
		if w.Operation == nil {
			return invalid("execute lacks operation")
		}
		switch Operation(*w.Operation) {
		case OpText:
			want = []int{fOperation | fInput}
		case OpWorkspaceEdit:
			want = []int{fOperation | fWorkspace | fInstruction | fTimeoutMS}
		default:
			return invalid("unknown operation")
		}
	case TypeProgress:
		want = []int{fSequence | fStage | fText}
	case TypeResult:
		// Text result: output alone. Workspace result: any subset of
		// commit_subject and the report pair (pairing checked by Validate).
		if got&fOutput != 0 {
			want = []int{fOutput}
		} else if got&^(fCommitSubject|fSummary|fChanges) == 0 {
			return nil
		}
	case TypeFailure:
		want = []int{fCategory}
	case TypeCancel:
		want = []int{0}
	}
	for _, m := range want {
		if got == m {
			return nil
		}
	}
	return invalid("%s frame has missing or foreign fields", t)
}

func fromWire(t Type, w *wireFrame) Frame {
	f := Frame{ID: *w.ID, Type: t}
	if w.Capabilities != nil {
		f.Capabilities = make([]Capability, len(*w.Capabilities))
		for i, c := range *w.Capabilities {
			f.Capabilities[i] = Capability(c)
		}
	}
	if l := w.Limits; l != nil {
		f.Limits = Limits{*l.FrameBytes, *l.ProgressFrames, *l.TextBytes, *l.ProgressTextBytes, *l.CommitSubjectBytes}
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	num := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	f.Operation = Operation(str(w.Operation))
	f.Input = str(w.Input)
	f.Workspace = str(w.Workspace)
	f.Instruction = str(w.Instruction)
	f.TimeoutMS = num(w.TimeoutMS)
	f.Sequence = num(w.Sequence)
	f.Stage = Stage(str(w.Stage))
	f.Text = str(w.Text)
	f.Output = w.Output
	f.CommitSubject = w.CommitSubject
	f.Summary = w.Summary
	if w.Changes != nil {
		f.Changes = append([]string{}, (*w.Changes)...)
	}
	f.Category = Category(str(w.Category))
	return f
}

// Encode returns the canonical encoding of f including its LF.
func Encode(f Frame) ([]byte, error) { return AppendFrame(nil, f) }

// DecodePluginFrame is DecodeFrame for a line a plugin wrote: a frame of a
// type only the Worker sends (initialize, execute, cancel) is a
// *ProtocolError, whatever the session state.
func DecodePluginFrame(line []byte) (Frame, error) {
	f, err := DecodeFrame(line)
	if err == nil && f.Type.FromWorker() {
		return Frame{}, invalid("the plugin sent a frame of type %s, which only the Worker sends", f.Type)
	}
	return f, err
}

// WriteFrame encodes f and writes it to w with a single Write call.
func WriteFrame(w io.Writer, f Frame) error {
	b, err := Encode(f)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

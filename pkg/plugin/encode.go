package plugin

import (
	"bytes"
	"encoding/json"
)

// Encode validates f (see Frame.Validate) and returns its canonical
// encoding: the frame's wire form through encoding/json (compact, keys in
// the order of wireFrame: version, id, type, then the type's fields),
// without HTML escaping, then one LF.
func Encode(f Frame) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	w := toWire(f)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, invalid("frame cannot be encoded")
	}
	if buf.Len()-1 > FrameBytes {
		return nil, invalid("frame exceeds %d bytes", FrameBytes)
	}
	return buf.Bytes(), nil
}

// toWire is f's wire form: exactly the fields of its type.
func toWire(f Frame) wireFrame {
	v, id, typ := Version, f.ID, string(f.Type)
	w := wireFrame{Version: &v, ID: &id, Type: &typ}
	ptr := func(s string) *string { return &s }
	switch f.Type {
	case TypeInitialize, TypeInitialized:
		caps := make([]string, len(f.Capabilities))
		for i, c := range f.Capabilities {
			caps[i] = string(c)
		}
		w.Capabilities = &caps
		if f.Type == TypeInitialize {
			l := f.Limits
			w.Limits = &wireLimits{&l.FrameBytes, &l.ProgressFrames, &l.TextBytes, &l.ProgressTextBytes, &l.CommitSubjectBytes}
		}
	case TypeExecute:
		w.Operation = ptr(string(f.Operation))
		if f.Operation == OpText {
			w.Input = ptr(f.Input)
		} else {
			w.Workspace, w.Instruction = ptr(f.Workspace), ptr(f.Instruction)
			ms := f.TimeoutMS
			w.TimeoutMS = &ms
		}
	case TypeProgress:
		seq := f.Sequence
		w.Sequence, w.Stage, w.Text = &seq, ptr(string(f.Stage)), ptr(f.Text)
	case TypeResult:
		w.Output, w.CommitSubject, w.Summary = f.Output, f.CommitSubject, f.Summary
		if f.Changes != nil {
			ch := f.Changes
			w.Changes = &ch
		}
	case TypeFailure:
		w.Category = ptr(string(f.Category))
	}
	return w
}

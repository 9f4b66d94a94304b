package plugin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// referenceEncode is the canonical encoding produced the slow way: the
// wire struct through encoding/json without HTML escaping. AppendFrame
// must match it byte for byte.
func referenceEncode(t testing.TB, f Frame) []byte {
	t.Helper()
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	for _, line := range corpusLines(t, "valid.ndjson") {
		f := mustDecode(t, string(line))
		got, err := Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceEncode(t, f); !bytes.Equal(got, want) {
			t.Fatalf("encoding differs from encoding/json:\n%s\n%s", got, want)
		}
	}
}

func TestAppendFrameAppends(t *testing.T) {
	prefix := []byte("prefix")
	out, err := AppendFrame(prefix, Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: "\xff"})
	if err == nil || string(out) != "prefix" {
		t.Fatalf("invalid frame: %q, %v", out, err)
	}
	out, err = AppendFrame(prefix, Frame{ID: testID, Type: TypeCancel})
	if err != nil || string(out) != `prefix{"version":"v1","id":"`+testID+`","type":"cancel"}`+"\n" {
		t.Fatalf("cancel: %q, %v", out, err)
	}
	// The largest text frame: every input byte escapes to six.
	in := strings.Repeat("\x01", TextBytes)
	out, err = AppendFrame(nil, Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: in})
	if err != nil || !bytes.Equal(out, referenceEncode(t, Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: in})) {
		t.Fatalf("largest text frame: %v", err)
	}
}

package plugin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// seedLines adds every corpus line of testdata/frames to f, via add.
func seedLines(f *testing.F, add func(line []byte)) {
	for _, name := range []string{"valid.ndjson", "invalid.ndjson"} {
		for _, line := range corpusLines(f, name) {
			add(line)
		}
	}
}

// validFrames returns the decoded frames of the valid corpus of type t.
func validFrames(f *testing.F, t Type) []Frame {
	var out []Frame
	for _, line := range corpusLines(f, "valid.ndjson") {
		fr := mustDecode(f, string(line))
		if fr.Type == t {
			out = append(out, fr)
		}
	}
	if len(out) == 0 {
		f.Fatalf("no %s seeds", t)
	}
	return out
}

// checkRoundTrip asserts the fuzz invariants for a frame that Validate
// accepted: it encodes, the encoding decodes to the same frame, and the
// encoding is a fixed point.
func checkRoundTrip(t *testing.T, fr Frame) {
	t.Helper()
	enc, err := Encode(fr)
	if err != nil {
		if strings.Contains(err.Error(), "exceeds") {
			return // valid values that together exceed one frame
		}
		t.Fatalf("valid frame does not encode: %v", err)
	}
	if want := referenceEncode(t, fr); !bytes.Equal(enc, want) {
		t.Fatalf("encoding differs from encoding/json:\n%s\n%s", enc, want)
	}
	back, err := DecodeFrame(enc[:len(enc)-1])
	if err != nil {
		t.Fatalf("canonical encoding does not decode: %v", err)
	}
	if !reflect.DeepEqual(normalize(fr), back) {
		t.Fatalf("round trip changed the frame:\n%#v\n%#v", fr, back)
	}
	enc2, err := Encode(back)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding is not a fixed point")
	}
}

// normalize maps representations that encode alike to one value.
func normalize(fr Frame) Frame {
	if fr.Changes != nil {
		fr.Changes = append([]string{}, fr.Changes...)
	}
	return fr
}

func FuzzReadFrame(f *testing.F) {
	seedLines(f, func(line []byte) {
		f.Add(append(append([]byte{}, line...), '\n'))
	})
	f.Add([]byte(""))
	f.Add([]byte("\n"))
	f.Add([]byte("{}\r\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("{\"a\":\"\xff\"}\n"))
	f.Add([]byte("{}\n{}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		total := 0
		for {
			line, err := ReadFrame(r)
			if err != nil {
				if line != nil {
					t.Fatal("frame returned with error")
				}
				var pe *ProtocolError
				if err != io.EOF && !errors.As(err, &pe) {
					t.Fatalf("unexpected error type %T", err)
				}
				if err == io.EOF && total != len(data) {
					t.Fatal("clean EOF before the end of input")
				}
				return
			}
			if len(line) == 0 || len(line) > FrameBytes || bytes.ContainsAny(line, "\r\n") {
				t.Fatal("returned line breaks the line rules")
			}
			if !bytes.Equal(data[total:total+len(line)], line) || data[total+len(line)] != '\n' {
				t.Fatal("returned line differs from the input")
			}
			total += len(line) + 1
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	seedLines(f, func(line []byte) { f.Add(line) })
	f.Fuzz(func(t *testing.T, line []byte) {
		var std bytes.Buffer
		if json.Compact(&std, line) == nil && compact(line) != bytes.Equal(std.Bytes(), line) {
			t.Fatal("compact disagrees with json.Compact")
		}
		checkDecodeWire(t, line)
		fr, err := DecodeFrame(line)
		if err != nil {
			if !reflect.DeepEqual(fr, Frame{}) {
				t.Fatal("frame returned with error")
			}
			return
		}
		if err := fr.Validate(); err != nil {
			t.Fatalf("decoded frame fails Validate: %v", err)
		}
		checkRoundTrip(t, fr)
	})
}

// FuzzSession drives a session with two corpus-style lines after a fixed
// valid prefix; whatever it accepts must keep its invariants.
func FuzzSession(f *testing.F) {
	seedLines(f, func(line []byte) { f.Add(uint8(0), line) })
	for i := uint8(0); i < 4; i++ {
		f.Add(i, []byte(`{"version":"v1","id":"`+testID+`","type":"progress","sequence":1,"stage":"started","text":"x"}`))
	}
	f.Fuzz(func(t *testing.T, prefix uint8, line []byte) {
		s, _ := NewSession(testID)
		steps := []Frame{offerFrame(Capabilities()...), selectFrame(CapText, CapProgress, CapCancel), textExecute("x")}
		for _, st := range steps[:int(prefix)%4] {
			if err := s.Accept(st); err != nil {
				t.Fatal(err)
			}
		}
		fr, err := DecodeFrame(line)
		if err != nil {
			return
		}
		before := *s
		if err := s.Accept(fr); err != nil {
			if !reflect.DeepEqual(before, *s) {
				t.Fatal("rejected frame changed the session")
			}
			return
		}
		if fr.Type == TypeProgress && s.ProgressCount() != fr.Sequence {
			t.Fatal("progress count does not follow the sequence")
		}
	})
}

func FuzzInitializeFrame(f *testing.F) {
	for _, fr := range append(validFrames(f, TypeInitialize), validFrames(f, TypeInitialized)...) {
		var caps []string
		for _, c := range fr.Capabilities {
			caps = append(caps, string(c))
		}
		f.Add(fr.Type == TypeInitialize, strings.Join(caps, ","), fr.Limits.FrameBytes, fr.Limits.TextBytes)
	}
	f.Fuzz(func(t *testing.T, offer bool, caps string, frameBytes, textBytes int64) {
		fr := Frame{ID: testID, Type: TypeInitialized}
		for _, c := range strings.Split(caps, ",") {
			fr.Capabilities = append(fr.Capabilities, Capability(c))
		}
		if offer {
			fr.Type, fr.Limits = TypeInitialize, V1Limits()
			fr.Limits.FrameBytes, fr.Limits.TextBytes = frameBytes, textBytes
		}
		if fr.Validate() != nil {
			if _, err := Encode(fr); err == nil {
				t.Fatal("invalid frame encoded")
			}
			return
		}
		if offer && fr.Limits != V1Limits() {
			t.Fatal("non-v1 limits accepted")
		}
		checkRoundTrip(t, fr)
	})
}

func FuzzExecuteFrame(f *testing.F) {
	for _, fr := range validFrames(f, TypeExecute) {
		f.Add(string(fr.Operation), fr.Input, fr.Workspace, fr.Instruction, fr.TimeoutMS)
	}
	f.Fuzz(func(t *testing.T, op, input, workspace, instruction string, timeout int64) {
		fr := Frame{ID: testID, Type: TypeExecute, Operation: Operation(op), Input: input,
			Workspace: workspace, Instruction: instruction, TimeoutMS: timeout}
		if fr.Validate() != nil {
			if _, err := Encode(fr); err == nil {
				t.Fatal("invalid frame encoded")
			}
			return
		}
		if fr.Operation == OpText && len(fr.Input) > TextBytes {
			t.Fatal("oversized input accepted")
		}
		checkRoundTrip(t, fr)
	})
}

func FuzzProgressFrame(f *testing.F) {
	for _, fr := range validFrames(f, TypeProgress) {
		f.Add(fr.Sequence, string(fr.Stage), fr.Text)
	}
	f.Fuzz(func(t *testing.T, seq int64, stage, text string) {
		fr := Frame{ID: testID, Type: TypeProgress, Sequence: seq, Stage: Stage(stage), Text: text}
		if fr.Validate() != nil {
			return
		}
		if seq < 1 || seq > ProgressFrames || len(text) > ProgressTextBytes {
			t.Fatal("out-of-range progress accepted")
		}
		checkRoundTrip(t, fr)
	})
}

func FuzzResultFrame(f *testing.F) {
	for _, fr := range validFrames(f, TypeResult) {
		mask := uint8(0)
		var out, subject, summary string
		if fr.Output != nil {
			mask, out = mask|1, *fr.Output
		}
		if fr.CommitSubject != nil {
			mask, subject = mask|2, *fr.CommitSubject
		}
		if fr.Summary != nil {
			mask, summary = mask|4, *fr.Summary
		}
		if fr.Changes != nil {
			mask |= 8
		}
		f.Add(mask, out, subject, summary, strings.Join(fr.Changes, "\x1f"))
	}
	f.Fuzz(func(t *testing.T, mask uint8, out, subject, summary, changes string) {
		fr := Frame{ID: testID, Type: TypeResult}
		if mask&1 != 0 {
			fr.Output = &out
		}
		if mask&2 != 0 {
			fr.CommitSubject = &subject
		}
		if mask&4 != 0 {
			fr.Summary = &summary
		}
		if mask&8 != 0 {
			fr.Changes = strings.Split(changes, "\x1f")
		}
		if fr.Validate() != nil {
			if _, err := Encode(fr); err == nil {
				t.Fatal("invalid frame encoded")
			}
			return
		}
		if fr.CommitSubject != nil && CheckCommitSubject(subject) != nil {
			t.Fatal("bad subject accepted")
		}
		if (fr.Summary == nil) != (fr.Changes == nil) {
			t.Fatal("partial report accepted")
		}
		checkRoundTrip(t, fr)
	})
}

func FuzzFailureFrame(f *testing.F) {
	for _, fr := range validFrames(f, TypeFailure) {
		f.Add(string(fr.Category), false)
	}
	f.Add("", true)
	f.Fuzz(func(t *testing.T, category string, cancel bool) {
		fr := Frame{ID: testID, Type: TypeFailure, Category: Category(category)}
		if cancel {
			fr.Type = TypeCancel
		}
		if fr.Validate() != nil {
			return
		}
		if cancel && category != "" || !cancel && !fr.Category.Valid() {
			t.Fatal("invalid frame accepted")
		}
		checkRoundTrip(t, fr)
	})
}

// FuzzDecodePluginFrame: the host's decoder is DecodeFrame minus the
// frame types only the Worker sends, with no partial frame on error.
func FuzzDecodePluginFrame(f *testing.F) {
	seedLines(f, func(line []byte) { f.Add(line) })
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := DecodePluginFrame(line)
		want, wantErr := DecodeFrame(line)
		switch {
		case wantErr != nil:
			if err == nil || !reflect.DeepEqual(got, Frame{}) {
				t.Fatalf("accepted what DecodeFrame refuses (%v)", wantErr)
			}
		case want.Type.FromWorker():
			var pe *ProtocolError
			if !errors.As(err, &pe) || !reflect.DeepEqual(got, Frame{}) {
				t.Fatalf("a %s frame from a plugin: %v", want.Type, err)
			}
		case err != nil || !reflect.DeepEqual(got, want):
			t.Fatalf("a %s frame decodes differently: %v", want.Type, err)
		}
	})
}

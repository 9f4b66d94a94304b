package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

const testID = "0123456789abcdef0123456789abcdef"

// corpusLines returns the lines of testdata/frames/name without their LF.
func corpusLines(tb testing.TB, name string) [][]byte {
	tb.Helper()
	data, err := os.ReadFile("testdata/frames/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		tb.Fatalf("%s must end with LF", name)
	}
	return bytes.Split(data[:len(data)-1], []byte("\n"))
}

func mustDecode(tb testing.TB, line string) Frame {
	tb.Helper()
	f, err := DecodeFrame([]byte(line))
	if err != nil {
		tb.Fatalf("DecodeFrame(%s): %v", line, err)
	}
	return f
}

func TestValidCorpusDecodesAndRoundTrips(t *testing.T) {
	lines := corpusLines(t, "valid.ndjson")
	if len(lines) < 20 {
		t.Fatalf("valid corpus has %d lines", len(lines))
	}
	for _, line := range lines {
		f := mustDecode(t, string(line))
		enc, err := Encode(f)
		if err != nil {
			t.Fatalf("Encode(%s): %v", line, err)
		}
		if enc[len(enc)-1] != '\n' || bytes.Count(enc, []byte("\n")) != 1 {
			t.Fatalf("encoding is not one LF-terminated line: %q", enc)
		}
		again := mustDecode(t, string(enc[:len(enc)-1]))
		if !reflect.DeepEqual(f, again) {
			t.Fatalf("round trip changed the frame:\n%#v\n%#v", f, again)
		}
		enc2, _ := Encode(again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not canonical:\n%s\n%s", enc, enc2)
		}
	}
}

func TestInvalidCorpusIsRejected(t *testing.T) {
	for _, line := range corpusLines(t, "invalid.ndjson") {
		f, err := DecodeFrame(line)
		if err == nil {
			t.Errorf("DecodeFrame accepted %s", line)
			continue
		}
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("error %T is not a *ProtocolError", err)
		}
		if !reflect.DeepEqual(f, Frame{}) {
			t.Errorf("DecodeFrame returned a frame with its error for %s", line)
		}
	}
}

func TestSpecExamplesEncodeExactly(t *testing.T) {
	examples := []string{
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"initialize","capabilities":["text"],"limits":{"frame_bytes":1048576,"progress_frames":128,"text_bytes":65536,"progress_text_bytes":1024,"commit_subject_bytes":256}}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"initialized","capabilities":["text"]}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"execute","operation":"text","input":"hello"}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"result","output":"HELLO"}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"execute","operation":"workspace_edit","workspace":"/operator/path","instruction":"edit the files","timeout_ms":60000}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"result","commit_subject":"feat: describe the edit"}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"progress","sequence":1,"stage":"started","text":"editing"}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"failure","category":"execution_failed"}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"cancel"}`,
		`{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"result","commit_subject":"a <b> & c","summary":"s","changes":["c"]}`,
	}
	for _, ex := range examples {
		enc, err := Encode(mustDecode(t, ex))
		if err != nil {
			t.Fatal(err)
		}
		if string(enc) != ex+"\n" {
			t.Errorf("Encode:\n got %s want %s", enc, ex)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	big := `{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + strings.Repeat("a", FrameBytes) + `"}`
	cases := map[string]string{
		"empty":                      ``,
		"oversized":                  big,
		"invalid utf8":               `{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + "\xff" + `"}`,
		"cr whitespace":              `{"version":"v1",` + "\r" + `"id":"` + testID + `","type":"cancel"}`,
		"text too long":              `{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + strings.Repeat("é", TextBytes/2+1) + `"}`,
		"output too long":            `{"version":"v1","id":"` + testID + `","type":"result","output":"` + strings.Repeat("x", TextBytes+1) + `"}`,
		"progress text":              `{"version":"v1","id":"` + testID + `","type":"progress","sequence":1,"stage":"working","text":"` + strings.Repeat("x", ProgressTextBytes+1) + `"}`,
		"subject too long":           `{"version":"v1","id":"` + testID + `","type":"result","commit_subject":"` + strings.Repeat("x", CommitSubjectBytes+1) + `"}`,
		"summary too long":           `{"version":"v1","id":"` + testID + `","type":"result","summary":"` + strings.Repeat("x", SummaryBytes+1) + `","changes":["c"]}`,
		"change too long":            `{"version":"v1","id":"` + testID + `","type":"result","summary":"s","changes":["` + strings.Repeat("x", ChangeBytes+1) + `"]}`,
		"instruction long":           `{"version":"v1","id":"` + testID + `","type":"execute","operation":"workspace_edit","workspace":"/w","instruction":"` + strings.Repeat("x", InstructionBytes+1) + `","timeout_ms":5}`,
		"escaped cr ok but nul path": `{"version":"v1","id":"` + testID + `","type":"execute","operation":"workspace_edit","workspace":"/w\u0000","instruction":"x","timeout_ms":5}`,
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeFrame([]byte(line)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestDecodeAcceptsBoundaries(t *testing.T) {
	cases := map[string]string{
		"text at limit":     `{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + strings.Repeat("é", TextBytes/2) + `"}`,
		"output at limit":   `{"version":"v1","id":"` + testID + `","type":"result","output":"` + strings.Repeat("x", TextBytes) + `"}`,
		"progress at limit": `{"version":"v1","id":"` + testID + `","type":"progress","sequence":1,"stage":"working","text":"` + strings.Repeat("x", ProgressTextBytes) + `"}`,
		"subject at limit":  `{"version":"v1","id":"` + testID + `","type":"result","commit_subject":"` + strings.Repeat("x", CommitSubjectBytes) + `"}`,
		"report at limits":  `{"version":"v1","id":"` + testID + `","type":"result","summary":"` + strings.Repeat("x", SummaryBytes) + `","changes":["` + strings.Repeat("y", ChangeBytes) + `"]}`,
		"timeout at limit":  `{"version":"v1","id":"` + testID + `","type":"execute","operation":"workspace_edit","workspace":"/w","instruction":"x","timeout_ms":86400000}`,
		"escaped text":      `{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"\r\n\"\\\u0000"}`,
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) { mustDecode(t, line) })
	}
}

func TestErrorsNeverEchoContent(t *testing.T) {
	secret := "s3cr3tvalue"
	lines := []string{
		`{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + secret + `","x":1}`,
		`{"version":"v1","id":"` + testID + `","type":"execute","operation":"` + secret + `","input":"a"}`,
		`{"version":"v1","id":"` + testID + `","type":"` + secret + `"}`,
		`{"version":"` + secret + `","id":"` + testID + `","type":"cancel"}`,
		`{"version":"v1","id":"` + testID + `","type":"cancel","` + secret + `":1}`,
		`{"version":"v1","id":"` + testID + `","type":"result","commit_subject":" ` + secret + `"}`,
		`{"version":"v1","id":"` + testID + `","type":"failure","category":"` + secret + `"}`,
		`{"version":"v1","id":"` + secret + `","type":"cancel"}`,
		`{"version":"v1", "id":"` + secret + `"}`,
	}
	for _, line := range lines {
		_, err := DecodeFrame([]byte(line))
		if err == nil {
			t.Fatalf("accepted %s", line)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error echoes content: %v", err)
		}
	}
}

func TestReadFrame(t *testing.T) {
	frame := `{"version":"v1","id":"` + testID + `","type":"cancel"}`
	atLimit := strings.Repeat("x", FrameBytes)
	cases := []struct {
		name   string
		input  string
		frames []string
		final  string // "eof" for clean EOF, otherwise a reason substring
	}{
		{"clean eof", "", nil, "eof"},
		{"one frame", frame + "\n", []string{frame}, "eof"},
		{"two frames", frame + "\n" + frame + "\n", []string{frame, frame}, "eof"},
		{"unterminated", frame, nil, "lacks its LF"},
		{"unterminated second", frame + "\n" + frame, []string{frame}, "lacks its LF"},
		{"blank", "\n", nil, "blank"},
		{"blank after frame", frame + "\n\n", []string{frame}, "blank"},
		{"crlf", frame + "\r\n", nil, "carriage return"},
		{"cr inside", "{\r}\n", nil, "carriage return"},
		{"invalid utf8", "{\"a\":\"\xc3\"}\n", nil, "UTF-8"},
		{"at limit", atLimit + "\n", []string{atLimit}, "eof"},
		{"over limit", atLimit + "x\n", nil, "exceeds"},
		{"over limit without lf", atLimit + "xxxxxx", nil, "exceeds"},
		{"at limit without lf", atLimit, nil, "lacks its LF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.input), 16)
			for _, want := range tc.frames {
				got, err := ReadFrame(r)
				if err != nil || string(got) != want {
					t.Fatalf("ReadFrame = %.40q, %v", got, err)
				}
			}
			got, err := ReadFrame(r)
			if got != nil {
				t.Fatal("frame returned with error")
			}
			if tc.final == "eof" {
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				return
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.final) {
				t.Fatalf("err = %v, want protocol error with %q", err, tc.final)
			}
		})
	}
}

// countingReader counts how many bytes were pulled through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadFrameStopsAtLimit(t *testing.T) {
	src := &countingReader{r: io.LimitReader(neverEnding('x'), 64<<20)}
	r := bufio.NewReaderSize(src, 4096)
	if _, err := ReadFrame(r); err == nil {
		t.Fatal("accepted endless line")
	}
	if src.n > FrameBytes+2*4096 {
		t.Fatalf("read %d bytes of an endless line", src.n)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestEncodeRejectsInvalidFrames(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := map[string]Frame{
		"bad id":             {ID: "x", Type: TypeCancel},
		"unknown type":       {ID: testID, Type: "hello"},
		"foreign field":      {ID: testID, Type: TypeCancel, Input: "x"},
		"input on workspace": {ID: testID, Type: TypeExecute, Operation: OpWorkspaceEdit, Workspace: "/w", Instruction: "i", TimeoutMS: 1, Input: "x"},
		"workspace on text":  {ID: testID, Type: TypeExecute, Operation: OpText, Workspace: "/w"},
		"invalid utf8":       {ID: testID, Type: TypeResult, Output: s("\xff")},
		"wrong limits":       {ID: testID, Type: TypeInitialize, Capabilities: []Capability{CapText}},
		"mixed result":       {ID: testID, Type: TypeResult, Output: s("x"), CommitSubject: s("y")},
		"half report":        {ID: testID, Type: TypeResult, Summary: s("x")},
		"progress seq 0":     {ID: testID, Type: TypeProgress, Stage: StageStarted},
		"no category":        {ID: testID, Type: TypeFailure},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if b, err := Encode(f); err == nil {
				t.Fatalf("encoded %s", b)
			}
		})
	}
}

func TestNewID(t *testing.T) {
	id, err := NewID(nil)
	if err != nil || !ident.ValidHexID(id) {
		t.Fatalf("NewID = %q, %v", id, err)
	}
	id2, _ := NewID(nil)
	if id == id2 {
		t.Fatal("two random ids are equal")
	}
	fixed, err := NewID(bytes.NewReader(bytes.Repeat([]byte{0xab}, 16)))
	if err != nil || fixed != strings.Repeat("ab", 16) {
		t.Fatalf("NewID(fixed) = %q, %v", fixed, err)
	}
	if _, err := NewID(bytes.NewReader([]byte{1})); err == nil {
		t.Fatal("short random source accepted")
	}
}

func TestV1Limits(t *testing.T) {
	l := V1Limits()
	if l.FrameBytes != 1048576 || l.ProgressFrames != 128 || l.TextBytes != 65536 || l.ProgressTextBytes != 1024 || l.CommitSubjectBytes != 256 {
		t.Fatalf("V1Limits = %+v", l)
	}
}

// Frames only the Worker sends are refused when a plugin writes them.
func TestDecodePluginFrame(t *testing.T) {
	const id = testID
	for _, typ := range []string{"initialize", "execute", "cancel"} {
		line := []byte(`{"version":"v1","id":"` + id + `","type":"` + typ + `"}`)
		var pe *ProtocolError
		if _, err := DecodePluginFrame(line); !errors.As(err, &pe) {
			t.Errorf("%s from a plugin: %v", typ, err)
		}
	}
	f, err := DecodePluginFrame([]byte(`{"version":"v1","id":"` + id + `","type":"failure","category":"cancelled"}`))
	if err != nil || f.Type != TypeFailure {
		t.Fatalf("failure frame: %+v %v", f, err)
	}
}

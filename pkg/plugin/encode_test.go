package plugin

import (
	"strings"
	"testing"
)

func TestEncodeEdges(t *testing.T) {
	if out, err := Encode(Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: "\xff"}); err == nil || out != nil {
		t.Fatalf("invalid frame: %q, %v", out, err)
	}
	out, err := Encode(Frame{ID: testID, Type: TypeCancel})
	if err != nil || string(out) != `{"version":"v1","id":"`+testID+`","type":"cancel"}`+"\n" {
		t.Fatalf("cancel: %q, %v", out, err)
	}
	out, err = Encode(Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: "<a&b>"})
	if err != nil || !strings.Contains(string(out), `"input":"<a&b>"`) {
		t.Fatalf("HTML characters escaped: %q, %v", out, err)
	}
	// The largest text frame: every input byte escapes to six.
	in := strings.Repeat("\x01", TextBytes)
	out, err = Encode(Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: in})
	if err != nil || len(out)-1 > FrameBytes {
		t.Fatalf("largest text frame: %d bytes, %v", len(out), err)
	}
	if f := mustDecode(t, string(out[:len(out)-1])); f.Input != in {
		t.Fatal("largest text frame does not round-trip")
	}
}

package plugin

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func BenchmarkDecodeFrame(b *testing.B) {
	line := []byte(`{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + strings.Repeat("hello ", 1000) + `"}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := DecodeFrame(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSmallFrame(b *testing.B) {
	line := []byte(`{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"hello"}`)
	for b.Loop() {
		if _, err := DecodeFrame(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeFrame(b *testing.B) {
	out := strings.Repeat("HELLO ", 1000)
	f := Frame{ID: testID, Type: TypeResult, Output: &out}
	for b.Loop() {
		if _, err := Encode(f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadFrame(b *testing.B) {
	line := []byte(`{"version":"v1","id":"` + testID + `","type":"execute","operation":"text","input":"` + strings.Repeat("hello ", 1000) + "\"}\n")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(line))); err != nil {
			b.Fatal(err)
		}
	}
}

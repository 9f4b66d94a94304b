package secretscan

import (
	"bytes"
	"testing"
)

// FuzzScanner checks the automaton against the plain definition: a
// stream holds a value exactly when one of its Forms is a substring,
// whatever the point where the stream is cut into two writes.
func FuzzScanner(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte("xx0123456789abcdefyy"), uint16(3))
	f.Add([]byte(token), []byte("d29ya2VyLXRvay9lbit7ZjNhOWMyMWUwYjQ9"), uint16(10))
	f.Add([]byte("aaaaaaaaaaaaaaaa"), []byte("aaaaaaaaaaaaaaaaaa"), uint16(0))
	f.Fuzz(func(t *testing.T, secret, doc []byte, cut uint16) {
		if len(secret) < MinSecretBytes || len(secret) > 256 {
			if _, err := New(secret); (err == nil) != (len(secret) >= MinSecretBytes && len(secret) <= MaxSecretBytes) {
				t.Fatalf("length %d: %v", len(secret), err)
			}
			return
		}
		s, err := New(secret)
		if err != nil {
			t.Fatal(err)
		}
		want := false
		for _, p := range Forms(secret) {
			want = want || bytes.Contains(doc, p)
		}
		c := int(cut) % (len(doc) + 1)
		sc := s.Scanner()
		sc.Write(doc[:c])
		sc.Write(doc[c:])
		if sc.Found() != want {
			t.Fatalf("found %v, want %v", sc.Found(), want)
		}
		// A value planted anywhere is always found.
		planted := append(append(append([]byte{}, doc[:c]...), secret...), doc[c:]...)
		if !s.Contains(planted) {
			t.Fatal("planted value not found")
		}
	})
}

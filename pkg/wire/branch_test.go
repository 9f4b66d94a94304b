package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A coding lease may name its repository's default branch; both encoders
// agree and the decoder returns it. Text leases and bad names are refused.
func TestLeaseDefaultBranch(t *testing.T) {
	l := testLease()
	l.Kind, l.DefaultBranch = KindCoding, "release/2"
	l.Task = json.RawMessage(`{"repository_id":"r","base_sha":"` + strings.Repeat("a", 40) + `","instruction":"x"}`)
	got, err := EncodeLease(&l)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Encode(Envelope{Type: TypeLease, Lease: &l})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeLease\n%s\nEncode\n%s (%v)", got, want, err)
	}
	e, err := Decode(got)
	if err != nil || e.Lease.DefaultBranch != "release/2" {
		t.Fatalf("decoded %+v, %v", e.Lease, err)
	}
	for name, mutate := range map[string]func(*Lease){
		"text lease": func(l *Lease) { l.Kind, l.Task = KindText, json.RawMessage(`{"input":"x"}`) },
		"bad name":   func(l *Lease) { l.DefaultBranch = "a..b" },
		"quote":      func(l *Lease) { l.DefaultBranch = `a"b` },
	} {
		bad := l
		mutate(&bad)
		if _, err := EncodeLease(&bad); err == nil {
			t.Errorf("%s: EncodeLease accepted", name)
		}
		if _, err := Encode(Envelope{Type: TypeLease, Lease: &bad}); err == nil {
			t.Errorf("%s: Encode accepted", name)
		}
	}
}

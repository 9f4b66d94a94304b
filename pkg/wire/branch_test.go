package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
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

func testLease() Lease {
	return Lease{JobID: "job_1", AttemptID: "0123456789abcdef0123456789abcdef", Ordinal: 3,
		DeadlineAt: time.Date(2026, 11, 29, 12, 0, 30, 500000000, time.UTC), Kind: KindText,
		Policy: json.RawMessage(`{"version":1,"plugin":"reference","env":["A","B"]}`),
		Task:   json.RawMessage(`{"input":"hello \u003cworld\u003e \"quoted\" ü"}`)}
}

// TestEncodeRefusesBadLeases: Encode validates a lease before it writes
// a byte.
func TestEncodeRefusesBadLeases(t *testing.T) {
	cases := map[string]func(*Lease){
		"job ref":        func(l *Lease) { l.JobID = `a"b` },
		"attempt ref":    func(l *Lease) { l.AttemptID = "" },
		"ordinal":        func(l *Lease) { l.Ordinal = 0 },
		"deadline":       func(l *Lease) { l.DeadlineAt = time.Time{} },
		"far deadline":   func(l *Lease) { l.DeadlineAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"kind":           func(l *Lease) { l.Kind = "shell" },
		"activity ver":   func(l *Lease) { l.ActivityVersion = "Live Activity" },
		"policy array":   func(l *Lease) { l.Policy = json.RawMessage(`[]`) },
		"policy broken":  func(l *Lease) { l.Policy = json.RawMessage(`{"a":`) },
		"task scalar":    func(l *Lease) { l.Task = json.RawMessage(`"x"`) },
		"task broken":    func(l *Lease) { l.Task = json.RawMessage(`{"input":"x"} {}`) },
		"task too large": func(l *Lease) { l.Task = json.RawMessage(`{"input":"` + strings.Repeat("x", MaxMessageBytes) + `"}`) },
		"base on text":   func(l *Lease) { l.BaseSHA = strings.Repeat("a", 40) },
		"base short":     func(l *Lease) { l.Kind, l.BaseSHA = KindCoding, "abc" },
		"base upper":     func(l *Lease) { l.Kind, l.BaseSHA = KindCoding, strings.Repeat("A", 40) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			l := testLease()
			mutate(&l)
			if _, err := Encode(Envelope{Type: TypeLease, Lease: &l}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

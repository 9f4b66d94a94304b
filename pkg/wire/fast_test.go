package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEncodeAckMatchesEncode(t *testing.T) {
	for _, c := range []struct {
		seq uint64
		at  time.Time
	}{
		{1, time.Time{}},
		{18446744073709551615, time.Time{}},
		{7, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)},
		{9, time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)},
		{9, time.Date(2026, 11, 29, 12, 0, 0, 120000000, time.FixedZone("x", 3600))},
	} {
		got, err := EncodeAck(c.seq, c.at)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Encode(Envelope{Type: TypeAck, Seq: c.seq, Ack: &Ack{DeadlineAt: c.at}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeAck %s, Encode %s", got, want)
		}
		if _, err := Decode(got); err != nil {
			t.Fatalf("own ack rejected: %v", err)
		}
	}
	if _, err := EncodeAck(0, time.Time{}); err == nil {
		t.Fatal("ack without seq accepted")
	}
}

func testLease() Lease {
	return Lease{JobID: "job_1", AttemptID: "0123456789abcdef0123456789abcdef", Ordinal: 3,
		DeadlineAt: time.Date(2026, 11, 29, 12, 0, 30, 500000000, time.UTC), Kind: KindText,
		Policy: json.RawMessage(`{"version":1,"plugin":"reference","env":["A","B"]}`),
		Task:   json.RawMessage(`{"input":"hello \u003cworld\u003e \"quoted\" ü"}`)}
}

func TestEncodeLeaseMatchesEncode(t *testing.T) {
	sha := strings.Repeat("a", 40)
	coding := testLease()
	coding.Kind, coding.Ordinal = KindCoding, 1
	coding.Task = json.RawMessage(`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[["go","test"]]}`)
	spaced := testLease()
	spaced.Policy = json.RawMessage("{ \"a\" : [1, 2] }")
	live := testLease()
	live.ActivityVersion = "live_activity/v1"
	for _, l := range []Lease{testLease(), coding, spaced, live} {
		got, err := EncodeLease(&l)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Encode(Envelope{Type: TypeLease, Lease: &l})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeLease\n%s\nEncode\n%s", got, want)
		}
		e, err := Decode(got)
		if err != nil {
			t.Fatalf("own lease rejected: %v", err)
		}
		if e.Lease.JobID != l.JobID || e.Lease.AttemptID != l.AttemptID || !e.Lease.DeadlineAt.Equal(l.DeadlineAt) ||
			e.Lease.Ordinal != l.Ordinal || e.Lease.ActivityVersion != l.ActivityVersion {
			t.Fatalf("round trip %+v", e.Lease)
		}
	}
}

func TestEncodeLeaseRejects(t *testing.T) {
	cases := map[string]func(*Lease){
		"job ref":        func(l *Lease) { l.JobID = `a"b` },
		"attempt ref":    func(l *Lease) { l.AttemptID = "" },
		"ordinal":        func(l *Lease) { l.Ordinal = 0 },
		"deadline":       func(l *Lease) { l.DeadlineAt = time.Time{} },
		"far deadline":   func(l *Lease) { l.DeadlineAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"kind":           func(l *Lease) { l.Kind = "shell" },
		"activity ver":   func(l *Lease) { l.ActivityVersion = "Live Activity" },
		"activity body":  func(l *Lease) { l.Activity = json.RawMessage(`{}`) },
		"policy array":   func(l *Lease) { l.Policy = json.RawMessage(`[]`) },
		"policy broken":  func(l *Lease) { l.Policy = json.RawMessage(`{"a":`) },
		"task scalar":    func(l *Lease) { l.Task = json.RawMessage(`"x"`) },
		"task broken":    func(l *Lease) { l.Task = json.RawMessage(`{"input":"x"} {}`) },
		"task too large": func(l *Lease) { l.Task = json.RawMessage(`{"input":"` + strings.Repeat("x", MaxMessageBytes) + `"}`) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			l := testLease()
			mutate(&l)
			if _, err := EncodeLease(&l); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// EncodeLease writes each Lease field by hand: a new field must be added
// there (and to TestEncodeLeaseMatchesEncode) before this count changes.
func TestEncodeLeaseKnowsEveryField(t *testing.T) {
	known := []string{"JobID", "AttemptID", "Ordinal", "DeadlineAt", "Kind", "Policy", "Task",
		"DefaultBranch", "ActivityVersion", "Activity"}
	typ := reflect.TypeOf(Lease{})
	if typ.NumField() != len(known) {
		t.Fatalf("Lease has %d fields, EncodeLease knows %d: update EncodeLease", typ.NumField(), len(known))
	}
	for i, name := range known {
		if typ.Field(i).Name != name {
			t.Fatalf("Lease field %d is %s, EncodeLease expects %s", i, typ.Field(i).Name, name)
		}
	}
}

package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
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

func TestEncodeLeaseMatchesEncode(t *testing.T) {
	sha := strings.Repeat("a", 40)
	coding := testLease()
	coding.Kind, coding.Ordinal = KindCoding, 1
	coding.Task = json.RawMessage(`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[["go","test"]]}`)
	spaced := testLease()
	spaced.Policy = json.RawMessage("{ \"a\" : [1, 2] }")
	live := testLease()
	live.ActivityVersion = "live_activity/v1"
	public := coding
	public.DefaultBranch, public.BaseSHA = "main", sha
	tokens, none := int64(12000), int64(0)
	metered := public
	metered.UsageVersion = UsageV1
	budgeted := metered
	budgeted.Budget = &Budget{MaxTokens: &tokens, MaxRequests: &none}
	onlyRequests := metered
	onlyRequests.Budget = &Budget{MaxRequests: &tokens}
	for _, l := range []Lease{testLease(), coding, spaced, live, public, metered, budgeted, onlyRequests} {
		got, err := EncodeLease(&l)
		if err != nil {
			t.Fatal(err)
		}
		// The message is the one allocation.
		if a := testing.AllocsPerRun(10, func() { EncodeLease(&l) }); a > 1 {
			t.Errorf("EncodeLease %s: %v allocations, want 1", l.Policy, a)
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
			e.Lease.Ordinal != l.Ordinal || e.Lease.ActivityVersion != l.ActivityVersion ||
			e.Lease.BaseSHA != l.BaseSHA || e.Lease.UsageVersion != l.UsageVersion || !reflect.DeepEqual(e.Lease.Budget, l.Budget) {
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
		"base on text":   func(l *Lease) { l.BaseSHA = strings.Repeat("a", 40) },
		"base short":     func(l *Lease) { l.Kind, l.BaseSHA = KindCoding, "abc" },
		"base upper":     func(l *Lease) { l.Kind, l.BaseSHA = KindCoding, strings.Repeat("A", 40) },
		"usage ver":      func(l *Lease) { l.UsageVersion = "Gateway Usage" },
		"budget alone":   func(l *Lease) { l.Budget = &Budget{MaxTokens: new(int64)} },
		"budget empty":   func(l *Lease) { l.UsageVersion, l.Budget = UsageV1, &Budget{} },
		"budget below":   func(l *Lease) { n := int64(-1); l.UsageVersion, l.Budget = UsageV1, &Budget{MaxRequests: &n} },
		"budget above":   func(l *Lease) { n := int64(MaxUsage + 1); l.UsageVersion, l.Budget = UsageV1, &Budget{MaxTokens: &n} },
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
		"DefaultBranch", "BaseSHA", "ActivityVersion", "Activity", "UsageVersion", "Budget"}
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

func TestEncodeResultMatchesEncode(t *testing.T) {
	out, empty, odd := "HELLO <b>&amp;</b> \"q\" \\ \n\t\r\b\f\x01\x7f \u2028\u2029 é 😀", "", "x"
	sha := strings.Repeat("a", 40)
	for _, c := range []struct {
		seq uint64
		r   *Result
	}{
		{1, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &out}},
		{18446744073709551615, &Result{JobID: "job_1", AttemptID: "0123456789abcdef", Outcome: OutcomeSucceeded, Output: &empty}},
		{7, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, CandidateSHA: sha}},
		{7, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, CandidateSHA: sha, AgentReport: &AgentReport{Summary: "s", Changes: []string{"c"}}}},
		{2, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeFailed, Disposition: DispositionRetryable, FailureCode: "plugin_failed"}},
		{2, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeFailed, Disposition: DispositionTerminal, FailureCode: "budget_exceeded", Usage: &Usage{Requests: 3, InputTokens: 9000, OutputTokens: 1200, CachedTokens: 4000}}},
		{2, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &out, Usage: &Usage{}}},
		{2, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &out, Usage: &Usage{OutputTokens: -1}}},
		{2, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &out, Usage: &Usage{Requests: MaxUsage + 1}}},
		// Refused alike: no seq, bad outcome, both output and candidate,
		// invalid UTF-8 output.
		{0, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &odd}},
		{1, &Result{JobID: "j", AttemptID: "a", Outcome: "maybe", Output: &odd}},
		{1, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &odd, CandidateSHA: sha}},
		{1, &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: func() *string { s := "\xff"; return &s }()}},
	} {
		got, err := EncodeResult(c.seq, c.r)
		want, wantErr := Encode(Envelope{Type: TypeResult, Seq: c.seq, Result: c.r})
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("EncodeResult %s %v, Encode %s %v", got, err, want, wantErr)
		}
	}
}

func TestEncodeActivityMatchesEncode(t *testing.T) {
	for _, p := range []Activity{
		{JobID: "j", AttemptID: "a", Version: "live_activity/v1", Stage: "analyzing"},
		{JobID: "j", AttemptID: "a", Version: "live_activity/v1", Stage: "nope"},
		{JobID: "", AttemptID: "a", Version: "live_activity/v1", Stage: "analyzing"},
	} {
		got, err := EncodeActivity(&p)
		want, wantErr := Encode(Envelope{Type: TypeActivity, Activity: &p})
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("EncodeActivity %s %v, Encode %s %v", got, err, want, wantErr)
		}
	}
}

// FuzzEncodeResult: the direct encoder writes Encode's bytes, or refuses
// what Encode refuses, for any output text and failure code.
func FuzzEncodeResult(f *testing.F) {
	f.Add("HELLO", "plugin_failed", uint64(1))
	f.Add("<&>\u2028\x00\"\\ é", "x", uint64(0))
	f.Add("\xff\xfe", "bad code", uint64(3))
	f.Fuzz(func(t *testing.T, out, code string, seq uint64) {
		for _, r := range []*Result{
			{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &out},
			{JobID: "j", AttemptID: "a", Outcome: OutcomeFailed, Disposition: DispositionTerminal, FailureCode: code},
		} {
			got, err := EncodeResult(seq, r)
			want, wantErr := Encode(Envelope{Type: TypeResult, Seq: seq, Result: r})
			if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("EncodeResult %q %v, Encode %q %v", got, err, want, wantErr)
			}
		}
		// The escaper itself, on any string, matches encoding/json.
		want, err := marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := strictjson.AppendString(nil, out); !bytes.Equal(got, want) {
			t.Fatalf("AppendString %q, encoding/json %q", got, want)
		}
	})
}

// FuzzCompactTo: appendCompact appends what json.Compact writes and fails
// when it fails, for any document.
func FuzzCompactTo(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c d"}]}`, "{ \"a\" : [1, 2] }", `{"a":null}`, `{"a":1,"a":2}`, `{"a":"\xff"}`,
		`{"a":"\u00e9 \\" "}`, `{"a":`, `[]`, `"x"`, `{"input":"x"} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want bytes.Buffer
		want.WriteString("prefix")
		got, _, err := appendCompact([]byte("prefix"), raw)
		wantErr := json.Compact(&want, raw)
		if (err == nil) != (wantErr == nil) || (err == nil && !bytes.Equal(got, want.Bytes())) {
			t.Fatalf("appendCompact %q %v, json.Compact %q %v", got, err, want.Bytes(), wantErr)
		}
	})
}

// sameAsEncodeLease fails t unless enc encodes l exactly as EncodeLease
// does (bytes, or a refusal).
func sameAsEncodeLease(t *testing.T, enc *LeaseEncoder, l Lease) {
	t.Helper()
	got, err := enc.Encode(&l)
	want, wantErr := EncodeLease(&l)
	if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("policy %q: LeaseEncoder %s %v, EncodeLease %s %v", l.Policy, got, err, want, wantErr)
	}
}

func TestLeaseEncoderMatchesEncodeLease(t *testing.T) {
	var enc LeaseEncoder
	l := testLease()
	policy := append([]byte(nil), l.Policy...)
	for _, p := range []string{string(policy), string(policy), "{ \"a\" : [1, 2] }", `{"a":1,"a":2}`, `{"a":`, `[]`,
		string(policy), `{"x":"\ud800"}`, string(policy)} {
		l.Policy = json.RawMessage(p)
		sameAsEncodeLease(t, &enc, l)
	}
	// The policy is remembered once found compact and valid, as a copy.
	if !enc.checked(policy) {
		t.Fatal("a compact, valid policy was not remembered")
	}
	l.Policy = append([]byte(nil), policy...)
	sameAsEncodeLease(t, &enc, l)
	l.Policy[len(l.Policy)-1] = ' ' // the caller's bytes change: now broken
	if _, err := enc.Encode(&l); err == nil {
		t.Fatal("broken policy accepted after a valid one")
	}
	if !enc.checked(policy) {
		t.Fatal("memory follows the caller's slice")
	}
	for _, p := range []string{"{ \"a\" : [1, 2] }", `{"a":1,"a":2}`} {
		if enc.checked([]byte(p)) {
			t.Fatalf("%s remembered: not copied verbatim", p)
		}
	}
}

// FuzzLeaseEncoder: whatever the policies of successive leases, one
// LeaseEncoder encodes each as EncodeLease does.
func FuzzLeaseEncoder(f *testing.F) {
	f.Add([]byte(`{"version":1,"plugin":"reference","env":["A","B"]}`), []byte(`{"version":1,"plugin":"reference","env":["A","B"] }`))
	f.Add([]byte(`{"a":1}`), []byte(`{"a":1,"a":1}`))
	f.Add([]byte(`{"a":"\u00e9"}`), []byte(`{"a":"\ud800"}`))
	f.Fuzz(func(t *testing.T, p1, p2 []byte) {
		var enc LeaseEncoder
		l := testLease()
		for _, p := range [][]byte{p1, p1, p2, p1, p2, p2} {
			l.Policy = p
			sameAsEncodeLease(t, &enc, l)
		}
	})
}

package store

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// The store enforces the evidence contract's two rules itself: evidence
// only for coding attempts, and no output but the fixed marker.
func TestStoreEnforcesEvidenceContract(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("text", 1), t0)
	mustSubmit(t, s, NewJob{ID: "code", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		Policy: testPolicy(time.Minute, time.Second, 1, "reference")}, t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	mustConnect(t, s, "worker-1#1", gen(2), t0)
	text := mustLease(t, s, "worker-1", gen(1), t0)
	one := func(r string) []json.RawMessage { return []json.RawMessage{json.RawMessage(r)} }
	if _, err := s.AddEvidence(bg, fenceOf(text, "worker-1", gen(1)), 1, one(`{"phase":"plugin","reason":"failed"}`), "", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("evidence for a text attempt: %v", err)
	}
	code, err := s.Lease(bg, "worker-1#1", gen(2), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || code == nil || code.JobID != "code" {
		t.Fatal(code, err)
	}
	f := fenceOf(code, "worker-1#1", gen(2))
	for _, rec := range []string{
		`{"phase":"scoped_check","output":"hunter2"}`,
		`{"output":"[REDACTED] hunter2"}`,
		`{"output":null}`,
		`{"output":5}`,
		`{"output":["[REDACTED]"]}`,
		`{"output":"","output":"hunter2"}`,
		`{"output":"","outp\u0075t":"hunter2"}`,
		`{"args":["hunter2"]}`,
		`{"args":"[REDACTED]"}`,
		`{"args":[null]}`,
		`{"phase":"plugin","phase":"plugin"}`,
		`{"Output":"hunter2"}`,
		`{"output":"","OUTPUT":"hunter2"}`,
		`{"arg\u017f":["hunter2"]}`,
	} {
		if _, err := s.AddEvidence(bg, f, 1, one(rec), "", t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", rec, err)
		}
	}
	ok := `{"phase":"scoped_check","args":["[REDACTED]","[REDACTED]"],"output":"[REDACTED]","nested":{"output":"x"}}`
	if _, err := s.AddEvidence(bg, f, 1, []json.RawMessage{json.RawMessage(ok), json.RawMessage(`{"output":""}`)}, "", t0); err != nil {
		t.Fatalf("redacted records: %v", err)
	}
}

func FuzzRedactedOnly(f *testing.F) {
	for _, b := range seeds(f, "evidence") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		c, isObject := compactObject(rec)
		if !isObject || !redactedOnly(c) {
			return
		}
		// An accepted record's top-level output and args decode (by the
		// lenient decoder every reader uses) to the marker only.
		var v struct {
			Output *string   `json:"output"`
			Args   []*string `json:"args"`
		}
		// encoding/json matches field names case-insensitively, so this
		// also reads any case variant the check let through.
		if err := json.Unmarshal(c, &v); err != nil {
			return
		}
		if v.Output != nil && *v.Output != "" && *v.Output != "[REDACTED]" {
			t.Fatalf("accepted output %q", *v.Output)
		}
		for _, a := range v.Args {
			if a == nil || *a != "[REDACTED]" {
				t.Fatalf("accepted args in %s", c)
			}
		}
		if strings.Contains(string(c), "hunter2") && strings.Contains(string(c), `"output":"hunter2"`) {
			t.Fatalf("accepted %s", c)
		}
	})
}

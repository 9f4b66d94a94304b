package configfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

type sampleItem struct {
	ID      string          `json:"id"`
	Timeout policy.Duration `json:"timeout"`
}

type sample struct {
	Version int             `json:"version"`
	Name    string          `json:"name"`
	Every   policy.Duration `json:"every"`
	Items   []sampleItem    `json:"items"`
}

var sampleFormat = Format{Config: "sample", Version: 1, MaxBytes: 512}

func (s *sample) Validate() error {
	if s.Name == "" {
		return sampleFormat.Errorf("name", "required")
	}
	for i, it := range s.Items {
		if it.Timeout <= 0 {
			return Prefix("items", sampleFormat.Errorf("["+string(rune('0'+i))+"].timeout", "must be positive"))
		}
	}
	return nil
}

func TestLoad(t *testing.T) {
	const good = `{"version":1,"name":"n","every":"30s","items":[{"id":"a","timeout":"1s"}]}`
	var s sample
	if err := sampleFormat.Load(strings.NewReader(good), &s); err != nil {
		t.Fatal(err)
	}
	if s.Every.Std().String() != "30s" || s.Items[0].ID != "a" {
		t.Fatalf("decoded %+v", s)
	}
	for _, tc := range []struct {
		name, doc, field, reason string
	}{
		{"too large", good + strings.Repeat(" ", 512), "", "file larger than 512 bytes"},
		{"no version", `{"name":"n"}`, "version", "must be 1"},
		{"version 2 with a new field", `{"version":2,"future":true}`, "version", "must be 1"},
		{"version string", `{"version":"1","name":"n"}`, "version", "must be 1"},
		{"malformed", `{"version":1,`, "", "malformed JSON"},
		{"not an object", `[1]`, "", "expected object, got array"},
		{"unknown field", `{"version":1,"name":"n","nmae":"x"}`, "", "unknown field"},
		{"unknown nested field", `{"version":1,"name":"n","items":[{"id":"a","timeout":"1s","x":1}]}`, "items[0]", "unknown field"},
		{"bad duration", `{"version":1,"name":"n","every":"soon"}`, "every", "not a valid duration"},
		{"bad nested duration", `{"version":1,"name":"n","items":[{"id":"a","timeout":"1s"},{"id":"b","timeout":"1 day"}]}`, "items[1].timeout", "not a valid duration"},
		{"duration number", `{"version":1,"name":"n","every":30}`, "every", "expected duration, got number"},
		{"validate", `{"version":1,"name":""}`, "name", "required"},
		{"validate section", `{"version":1,"name":"n","items":[{"id":"a","timeout":"-1s"}]}`, "items[0].timeout", "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s sample
			err := sampleFormat.Load(strings.NewReader(tc.doc), &s)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Config != "sample" || e.Field != tc.field || !strings.HasPrefix(e.Reason, tc.reason) {
				t.Fatalf("got %+v, want field %q reason %q", e, tc.field, tc.reason)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	if got := (&Error{Config: "gate", Field: "workers[0].id", Reason: "must be a safe id"}).Error(); got != "gate config: workers[0].id: must be a safe id" {
		t.Fatal(got)
	}
	if got := (&Error{Config: "worker", Reason: "cannot read"}).Error(); got != "worker config: cannot read" {
		t.Fatal(got)
	}
}

func TestFieldPath(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "/version": "version", "/workers/0/id": "workers[0].id",
		"/repositories/12/execution/plugin_timeout": "repositories[12].execution.plugin_timeout",
		"/0": "[0]", "/m/*": "m.*",
	} {
		if got := FieldPath(in); got != want {
			t.Errorf("FieldPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrefix(t *testing.T) {
	f := Format{Config: "x"}
	for field, want := range map[string]string{"": "lifecycle", "lease_ttl": "lifecycle.lease_ttl", "[2].id": "lifecycle[2].id"} {
		var e *Error
		if !errors.As(Prefix("lifecycle", f.Errorf(field, "r")), &e) || e.Field != want {
			t.Errorf("Prefix(%q) = %+v, want field %q", field, e, want)
		}
	}
	plain := errors.New("plain")
	if Prefix("s", plain) != plain {
		t.Error("Prefix changed a non-config error")
	}
}

// FuzzLoad: Load never panics, every refusal is a value-free *Error of the
// format's kind, and an accepted document re-validates.
func FuzzLoad(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "seed", "*.json"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds under testdata/seed (%v)", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var s sample
		err := sampleFormat.Load(bytes.NewReader(doc), &s)
		if err == nil {
			if s.Version != 1 || s.Validate() != nil {
				t.Fatalf("accepted %q as %+v", doc, s)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Config != "sample" {
			t.Fatalf("refusal %v is not a sample *Error", err)
		}
		if s.Name != "" && len(s.Name) >= 4 && strings.Contains(err.Error(), s.Name) {
			t.Fatalf("error %q echoes the name value", err)
		}
	})
}

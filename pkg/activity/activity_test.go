package activity

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/testseed"
)

const (
	jobA = "0123456789abcdef0123456789abcdef"
	attA = "fedcba9876543210fedcba9876543210"
)

func TestStageOrder(t *testing.T) {
	want := []Stage{"analyzing", "editing", "testing", "preparing_result"}
	if got := Stages(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Stages() = %v", got)
	}
	for i, s := range want {
		if s.Rank() != i+1 || !s.Valid() {
			t.Errorf("%s: rank %d valid %v", s, s.Rank(), s.Valid())
		}
	}
	for _, s := range []Stage{"", "started", "working", "finalizing", "Analyzing", "done"} {
		if s.Valid() || s.Rank() != 0 {
			t.Errorf("%q accepted as a stage", s)
		}
	}
}

func TestSelect(t *testing.T) {
	cases := []struct {
		name  string
		offer []string
		want  string
	}{
		{"absent", nil, ""},
		{"empty", []string{}, ""},
		{"known", []string{"live_activity/v1"}, Version},
		{"unknown only", []string{"live_activity/v2"}, ""},
		{"known among unknown", []string{"live_activity/v2", "live_activity/v1"}, Version},
		{"case variant", []string{"Live_Activity/V1"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Select(c.offer); got != c.want {
				t.Fatalf("Select = %q, want %q", got, c.want)
			}
		})
	}
	if !reflect.DeepEqual(Offer(), []string{Version}) || !Known(Version) || Known("") || Known("live_activity/v2") {
		t.Fatal("Offer/Known disagree with Version")
	}
}

func TestValidOffer(t *testing.T) {
	good := [][]string{nil, {}, {Version}, {Version, "live_activity/v2"}, {strings.Repeat("a", MaxVersionBytes)}}
	for _, o := range good {
		if err := ValidOffer(o); err != nil {
			t.Errorf("offer %q refused", o)
		}
	}
	nine := make([]string, MaxOffer+1)
	for i := range nine {
		nine[i] = "v" + string(rune('a'+i))
	}
	bad := [][]string{{""}, {Version, Version}, {"LIVE"}, {"a b"}, {strings.Repeat("a", MaxVersionBytes+1)}, {"é"}, nine}
	for _, o := range bad {
		if err := ValidOffer(o); err != ErrOffer {
			t.Errorf("offer %q: err %v, want ErrOffer", o, err)
		}
	}
}

func TestDecodePayloadSeeds(t *testing.T) {
	for name, data := range testseed.Read(t, "testdata/seed/*.json") {
		t.Run(name, func(t *testing.T) {
			p, err := DecodePayload(data)
			if strings.HasPrefix(name, "valid-") {
				if err != nil {
					t.Fatalf("valid seed refused: %v", err)
				}
				if p.JobID != jobA || p.AttemptID != attA || p.Version != Version || !p.Stage.Valid() {
					t.Fatalf("decoded %+v", p)
				}
				return
			}
			if err != ErrInvalid || p != (Payload{}) {
				t.Fatalf("bad seed: payload %+v err %v", p, err)
			}
		})
	}
}

func TestDecodePayloadErrorsAreValueFree(t *testing.T) {
	secret := "sk-live-secret-value"
	data := []byte(`{"job_id":"` + jobA + `","attempt_id":"` + attA + `","version":"live_activity/v1","stage":"` + secret + `"}`)
	_, err := DecodePayload(data)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("err %v", err)
	}
	if _, err := DecodePayload(bytes.Repeat([]byte(" "), MaxPayloadBytes+1)); err != ErrInvalid {
		t.Fatalf("oversized payload: %v", err)
	}
}

// TestPayloadHasNoRoomForContent pins the payload and event shapes: adding
// a field (text, command, output, timestamp, …) must be a deliberate
// change of this test.
func TestPayloadHasNoRoomForContent(t *testing.T) {
	if got := fieldNames(reflect.TypeOf(Payload{})); !reflect.DeepEqual(got, []string{"attempt_id", "job_id", "stage", "version"}) {
		t.Fatalf("payload fields %v", got)
	}
	if got := fieldNames(reflect.TypeOf(Event{})); !reflect.DeepEqual(got, []string{"At", "AttemptID", "JobID", "Lane", "Ordinal", "Stage"}) {
		t.Fatalf("event fields %v", got)
	}
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("json")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func FuzzDecodePayload(f *testing.F) {
	for _, data := range testseed.Read(f, "testdata/seed/*.json") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePayload(data)
		if err != nil {
			if p != (Payload{}) || err != ErrInvalid {
				t.Fatalf("error %v with payload %+v", err, p)
			}
			return
		}
		if p.Validate() != nil {
			t.Fatal("decoded payload does not validate")
		}
		enc, err := json.Marshal(p)
		if err != nil || len(enc) > MaxPayloadBytes {
			t.Fatalf("encode: %v (%d bytes)", err, len(enc))
		}
		again, err := DecodePayload(enc)
		if err != nil || again != p {
			t.Fatal("canonical form does not round-trip")
		}
	})
}

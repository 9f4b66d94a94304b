package strictjson

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Name  string   `json:"name"`
	Count int      `json:"count,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

type sample struct {
	Version int               `json:"version"`
	Ratio   float64           `json:"ratio,omitempty"`
	On      bool              `json:"on,omitempty"`
	Inner   inner             `json:"inner"`
	List    []inner           `json:"list,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Small   int8              `json:"small,omitempty"`
	Unsign  uint16            `json:"unsigned,omitempty"`
	Ptr     *inner            `json:"ptr,omitempty"`
	skip    int
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want sample
	}{
		{"minimal", `{"version":1,"inner":{"name":"a"}}`, sample{Version: 1, Inner: inner{Name: "a"}}},
		{"whitespace", " {\n\t\"version\" : 2 , \"inner\" : {\"name\":\"b\"} }\n", sample{Version: 2, Inner: inner{Name: "b"}}},
		{"nested list", `{"version":1,"inner":{"name":"a"},"list":[{"name":"x","tags":["p","q"]}]}`,
			sample{Version: 1, Inner: inner{Name: "a"}, List: []inner{{Name: "x", Tags: []string{"p", "q"}}}}},
		{"map", `{"version":1,"inner":{"name":""},"labels":{"k":"v"}}`, sample{Version: 1, Labels: map[string]string{"k": "v"}}},
		{"raw any shape", `{"version":1,"inner":{"name":""},"raw":{"x":[1,true,"s"]}}`, sample{Version: 1, Raw: json.RawMessage(`{"x":[1,true,"s"]}`)}},
		{"surrogate pair", `{"version":1,"inner":{"name":"\ud83d\ude00"}}`, sample{Version: 1, Inner: inner{Name: "😀"}}},
		{"escaped backslash u", `{"version":1,"inner":{"name":"\\udc00"}}`, sample{Version: 1, Inner: inner{Name: `\udc00`}}},
		{"float", `{"version":1,"inner":{"name":""},"ratio":1.5e3}`, sample{Version: 1, Ratio: 1500}},
		{"pointer", `{"version":1,"inner":{"name":""},"ptr":{"name":"p"}}`, sample{Version: 1, Ptr: &inner{Name: "p"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got sample
			if err := Decode([]byte(tt.in), &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name, in, path string
	}{
		{"duplicate top", `{"version":1,"version":1,"inner":{"name":""}}`, "/version"},
		{"duplicate nested", `{"version":1,"inner":{"name":"","name":""}}`, "/inner/name"},
		{"duplicate in map", `{"version":1,"inner":{"name":""},"labels":{"a":"","a":""}}`, "/labels/*"},
		{"duplicate in raw", `{"version":1,"inner":{"name":""},"raw":{"a":1,"a":2}}`, "/raw/*"},
		{"unknown", `{"version":1,"inner":{"name":""},"extra":1}`, ""},
		{"case variant", `{"Version":1,"inner":{"name":""}}`, ""},
		{"case variant nested", `{"version":1,"inner":{"NAME":""}}`, "/inner"},
		{"unexported", `{"version":1,"inner":{"name":""},"skip":1}`, ""},
		{"trailing value", `{"version":1,"inner":{"name":""}} {}`, ""},
		{"trailing garbage", `{"version":1,"inner":{"name":""}}x`, ""},
		{"bool for int", `{"version":true,"inner":{"name":""}}`, "/version"},
		{"float for int", `{"version":1.5,"inner":{"name":""}}`, "/version"},
		{"float form for int", `{"version":1.0,"inner":{"name":""}}`, "/version"},
		{"exponent for int", `{"version":1e2,"inner":{"name":""}}`, "/version"},
		{"string for int", `{"version":"1","inner":{"name":""}}`, "/version"},
		{"int8 overflow", `{"version":1,"inner":{"name":""},"small":300}`, "/small"},
		{"negative unsigned", `{"version":1,"inner":{"name":""},"unsigned":-1}`, "/unsigned"},
		{"number for string", `{"version":1,"inner":{"name":1}}`, "/inner/name"},
		{"object for string", `{"version":1,"inner":{"name":{}}}`, "/inner/name"},
		{"array for object", `{"version":1,"inner":[]}`, "/inner"},
		{"null field", `{"version":1,"inner":null}`, "/inner"},
		{"null element", `{"version":1,"inner":{"name":"","tags":[null]}}`, "/inner/tags/0"},
		{"null in raw", `{"version":1,"inner":{"name":""},"raw":null}`, "/raw"},
		{"null document", `null`, ""},
		{"lone high surrogate", `{"version":1,"inner":{"name":"\ud800"}}`, ""},
		{"lone low surrogate", `{"version":1,"inner":{"name":"\udc00"}}`, ""},
		{"high then non-low", `{"version":1,"inner":{"name":"\ud800\u0041"}}`, ""},
		{"malformed", `{"version":1,`, ""},
		{"empty", ``, ""},
		{"single quotes", `{'version':1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sample{Version: 99}
			err := Decode([]byte(tt.in), &got)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Decode = %v, want *Error", err)
			}
			if tt.path != "" && se.Path != tt.path {
				t.Fatalf("path = %q, want %q (%v)", se.Path, tt.path, err)
			}
			if got.Version != 99 {
				t.Fatalf("target modified on error: %+v", got)
			}
		})
	}
}

func TestDecodeRejectsInvalidUTF8(t *testing.T) {
	var got sample
	err := Decode([]byte("{\"version\":1,\"inner\":{\"name\":\"\xff\"}}"), &got)
	if err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("Decode = %v, want invalid UTF-8", err)
	}
}

func TestDecodeDepth(t *testing.T) {
	var v any
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if err := Decode([]byte(deep), &v); err == nil {
		t.Fatal("deep nesting accepted")
	}
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if err := Decode([]byte(ok), &v); err != nil {
		t.Fatalf("depth %d rejected: %v", MaxDepth, err)
	}
}

func TestErrorNeverEchoesValues(t *testing.T) {
	secret := "s3cr3t-value"
	inputs := []string{
		`{"version":"` + secret + `","inner":{"name":""}}`,
		`{"` + secret + `":1}`,
		`{"version":1,"inner":{"name":""}}` + secret,
		`{"version":1,"inner":{"name":"` + secret + `","name":""}}`,
	}
	for _, in := range inputs {
		var got sample
		err := Decode([]byte(in), &got)
		if err == nil {
			t.Fatalf("accepted %q", in)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error echoes value: %v", err)
		}
	}
}

func TestDecodeReader(t *testing.T) {
	var got sample
	in := `{"version":1,"inner":{"name":"abc"}}`
	if err := DecodeReader(strings.NewReader(in), int64(len(in)), &got); err != nil {
		t.Fatalf("at limit: %v", err)
	}
	if err := DecodeReader(strings.NewReader(in), int64(len(in)-1), &got); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over limit: %v", err)
	}
}

func TestDecodeTarget(t *testing.T) {
	var s sample
	if err := Decode([]byte(`{}`), s); err == nil {
		t.Fatal("non-pointer target accepted")
	}
}

func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seed", "*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got sample
		if err := Decode(data, &got); err != nil {
			if !reflect.DeepEqual(got, sample{}) {
				t.Fatalf("value returned with error %v", err)
			}
			return
		}
		// A document that was accepted re-encodes canonically, and the
		// canonical form is accepted and decodes to the same value.
		canon, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var again sample
		if err := Decode(canon, &again); err != nil {
			t.Fatalf("canonical form %s rejected: %v", canon, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(again)) {
			t.Fatalf("round trip changed value: %+v vs %+v", got, again)
		}
	})
}

// normalize maps values that canonical encoding cannot distinguish (an empty
// versus absent omitempty collection, raw spacing) onto one form.
func normalize(s sample) sample {
	if len(s.List) == 0 {
		s.List = nil
	}
	for i := range s.List {
		if len(s.List[i].Tags) == 0 {
			s.List[i].Tags = nil
		}
	}
	if len(s.Inner.Tags) == 0 {
		s.Inner.Tags = nil
	}
	if s.Ptr != nil && len(s.Ptr.Tags) == 0 {
		s.Ptr.Tags = nil
	}
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	if len(s.Raw) > 0 {
		var v any
		_ = json.Unmarshal(s.Raw, &v)
		s.Raw, _ = json.Marshal(v)
	}
	return s
}

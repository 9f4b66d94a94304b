package strictjson

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wide exercises every shape the scanner distinguishes.
type wide struct {
	Int8    int8               `json:"i8,omitempty"`
	Int64   int64              `json:"i64,omitempty"`
	Uint8   uint8              `json:"u8,omitempty"`
	Uint64  uint64             `json:"u64,omitempty"`
	Uintptr uintptr            `json:"uptr,omitempty"`
	F32     float32            `json:"f32,omitempty"`
	F64     float64            `json:"f64,omitempty"`
	B       bool               `json:"b,omitempty"`
	S       string             `json:"s,omitempty"`
	At      time.Time          `json:"at,omitzero"`
	Pair    [2]int             `json:"pair,omitzero"`
	IntKeys map[int]string     `json:"int_keys,omitempty"`
	Nested  map[string][]inner `json:"nested,omitempty"`
	Any     any                `json:"any,omitempty"`
	Bytes   []byte             `json:"bytes,omitempty"`
	Self    *wide              `json:"self,omitempty"`
	PP      **inner            `json:"pp,omitempty"`
	inner
}

// differentialTypes are the targets FuzzCheckMatchesReference checks every
// input against.
var differentialTypes = []reflect.Type{
	reflect.TypeOf(sample{}), reflect.TypeOf(wide{}), reflect.TypeOf(json.RawMessage(nil)),
	reflect.TypeOf([]int{}), reflect.TypeOf(map[string]int{}), reflect.TypeOf(""), reflect.TypeOf(0),
}

// sameError reports whether two Check results are the same acceptance or
// the same *Error.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ea, eb *Error
	return errors.As(a, &ea) && errors.As(b, &eb) && *ea == *eb
}

func TestCheckMatchesReference(t *testing.T) {
	docs := []string{
		`{"version":1,"inner":{"name":"a"}}`, `{"version":1,,}`, `{"version":1 "inner":{}}`, `[1,]`, `[1 2]`, `[,1]`,
		`{,}`, `{]`, `[}`, `{"a":1}x`, `{"a" 1}`, `01`, `-`, `1.`, `1e`, `1e+`, `-0`, `"\x"`, "\"a\x01\"", `tru`, `truex`,
		`nul`, `{"i8":127}`, `{"i8":128}`, `{"i8":-128}`, `{"i8":-129}`, `{"u8":255}`, `{"u8":256}`, `{"u8":-0}`,
		`{"u64":18446744073709551615}`, `{"u64":18446744073709551616}`, `{"i64":-9223372036854775808}`,
		`{"i64":9223372036854775808}`, `{"i64":1.0}`, `{"uptr":1}`, `{"f32":1e39}`, `{"f64":1e400}`, `{"at":"x"}`,
		`{"at":{}}`, `{"at":{"a":1}}`, `{"pair":[1,2,3]}`, `{"pair":[1,2]}`, `{"int_keys":{}}`, `{"nested":{"a":[{"name":"x","name":"y"}]}}`,
		`{"any":{"a":{"b":[1,{"c":null}]}}}`, `{"bytes":"AA=="}`, `{"self":{"self":{"i8":1000}}}`, `{"pp":{"name":""}}`,
		`{"name":"x","tags":["a"],"count":1}`, `{"n\u0061me":"x","name":"y"}`, `{"any":{"\u00e9":1,"é":2}}`,
		`{"any":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}}`,
		`{"s":"\ud83d\ude00"}`, `{"s":"\ud83d"}`, `{"s":"\ude00"}`, "{\"s\":\"\xff\"}", `{"b":true,"b":false}`, `{"b":1}`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), strings.Repeat(`{"a":`, 40), ` `, ``, `{"s":"a"}  `,
	}
	for _, d := range docs {
		for _, typ := range differentialTypes {
			got, want := Check([]byte(d), typ), refCheck([]byte(d), typ)
			if !sameError(got, want) {
				t.Errorf("%s into %v: scanner %v, reference %v", d, typ, got, want)
			}
		}
	}
}

// FuzzCheckMatchesReference: the scanner accepts and rejects exactly what
// the tokenizer-based reference does, with the same error.
func FuzzCheckMatchesReference(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seed", "*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range differentialTypes {
			got, want := Check(data, typ), refCheck(data, typ)
			if !sameError(got, want) {
				t.Fatalf("into %v: scanner %v, reference %v", typ, got, want)
			}
		}
	})
}

package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The implementation Check had before its hand-written scanner: a walk
// over encoding/json's tokenizer. FuzzCheckMatchesReference compares the
// two; the scanner must accept and reject exactly the same documents with
// the same error.

// Check validates data against the shape of type t without storing it.
func refCheck(data []byte, t reflect.Type) error {
	if !utf8.Valid(data) {
		return &Error{Reason: "invalid UTF-8"}
	}
	if err := refCheckEscapes(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := refWalker{dec: dec}
	if err := w.value(t, "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: "trailing data after the value"}
	}
	return nil
}

// checkEscapes rejects \u escapes that do not form valid UTF-16: a high
// surrogate must be followed by a low surrogate, and a low surrogate may not
// stand alone. A backslash only ever appears inside strings in valid JSON, so
// no string tracking is needed; malformed JSON is left to the tokenizer.
func refCheckEscapes(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 >= len(data) {
			return nil
		}
		if data[i+1] != 'u' {
			i++
			continue
		}
		r, ok := refHex4(data, i+2)
		if !ok {
			return nil
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return &Error{Reason: "lone surrogate escape"}
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
				return &Error{Reason: "lone surrogate escape"}
			}
			lo, ok := refHex4(data, i+8)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return &Error{Reason: "lone surrogate escape"}
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}

func refHex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

type refWalker struct {
	dec *json.Decoder
}

var (
	refRawMessageType      = reflect.TypeOf(json.RawMessage(nil))
	refJSONUnmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	refTextUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// opaque reports whether t takes any JSON value, checked only for duplicate
// keys, depth and nulls.
func refOpaque(t reflect.Type) bool {
	return t == refRawMessageType || t.Kind() == reflect.Interface ||
		(t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(refJSONUnmarshalerType) && !reflect.PointerTo(t).Implements(refTextUnmarshalerType))
}

func (w *refWalker) value(t reflect.Type, path string, depth int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return &Error{Path: path, Reason: "malformed JSON"}
	}
	return w.token(tok, t, path, depth)
}

func (w *refWalker) token(tok json.Token, t reflect.Type, path string, depth int) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && refOpaque(t) {
		t = nil
	}
	switch tok := tok.(type) {
	case nil:
		return &Error{Path: path, Reason: "null is not allowed"}
	case json.Delim:
		if depth >= MaxDepth {
			return &Error{Path: path, Reason: "nesting too deep"}
		}
		if tok == '{' {
			return w.object(t, path, depth+1)
		}
		return w.array(t, path, depth+1)
	case bool:
		if t != nil && t.Kind() != reflect.Bool {
			return &Error{Path: path, Reason: "expected " + kindName(t) + ", got boolean"}
		}
	case string:
		if t != nil && t.Kind() != reflect.String && !reflect.PointerTo(t).Implements(refTextUnmarshalerType) {
			return &Error{Path: path, Reason: "expected " + kindName(t) + ", got string"}
		}
	case json.Number:
		return refNumber(tok, t, path)
	}
	return nil
}

func refNumber(n json.Number, t reflect.Type, path string) error {
	if t == nil {
		return nil
	}
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(string(n), 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, err = strconv.ParseUint(string(n), 10, t.Bits())
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(string(n), t.Bits())
	default:
		return &Error{Path: path, Reason: "expected " + kindName(t) + ", got number"}
	}
	if err != nil {
		return &Error{Path: path, Reason: "number out of range or not a " + kindName(t)}
	}
	return nil
}

func (w *refWalker) object(t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch {
		case t.Kind() == reflect.Struct:
			fields = refStructFields(t)
		case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
			elem = t.Elem()
		default:
			return &Error{Path: path, Reason: "expected " + kindName(t) + ", got object"}
		}
	}
	seen := make(map[string]struct{})
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return &Error{Path: path, Reason: "malformed JSON"}
		}
		key, ok := tok.(string)
		if !ok {
			return &Error{Path: path, Reason: "malformed JSON"}
		}
		// Only struct field names are ours; map and opaque keys are data and
		// never appear in an error.
		ft, known := elem, fields == nil
		child := path + "/*"
		if fields != nil {
			ft, known = fields[key]
			if !known {
				return &Error{Path: path, Reason: "unknown field"}
			}
			child = path + "/" + key
		}
		if _, dup := seen[key]; dup {
			return &Error{Path: child, Reason: "duplicate key"}
		}
		seen[key] = struct{}{}
		if err := w.value(ft, child, depth); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return &Error{Path: path, Reason: "malformed JSON"}
	}
	return nil
}

func (w *refWalker) array(t reflect.Type, path string, depth int) error {
	var elem reflect.Type
	limit := -1
	if t != nil {
		switch t.Kind() {
		case reflect.Slice:
			elem = t.Elem()
		case reflect.Array:
			elem, limit = t.Elem(), t.Len()
		default:
			return &Error{Path: path, Reason: "expected " + kindName(t) + ", got array"}
		}
	}
	for i := 0; w.dec.More(); i++ {
		if limit >= 0 && i >= limit {
			return &Error{Path: path, Reason: "too many elements"}
		}
		if err := w.value(elem, path+"/"+strconv.Itoa(i), depth); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return &Error{Path: path, Reason: "malformed JSON"}
	}
	return nil
}

func refStructFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type)
	refCollectFields(t, m)
	return m
}

func refCollectFields(t reflect.Type, m map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				refCollectFields(ft, m)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
}

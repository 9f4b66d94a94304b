// Package strictjson decodes JSON that crosses a trust boundary: plugin
// frames, configuration files, HTTP bodies and WebSocket messages.
//
// Decode accepts a document only when all of these hold:
//   - the bytes are valid UTF-8 and every \u escape is a valid UTF-16 unit
//     (no lone surrogates);
//   - object keys are unique at every depth;
//   - every key names a field of the target struct exactly (case-sensitive);
//   - every value has the JSON type the target expects (a float or bool is
//     never an integer, "1.0" is not an integer);
//   - no value is null (encoders in this project omit absent fields);
//   - nesting is at most MaxDepth levels;
//   - nothing but whitespace follows the value.
//
// On error the target is left untouched and the error text names the JSON
// path of the offending element but never echoes a value.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects.
const MaxDepth = 32

// Error describes why a document was rejected. Path is a JSON-pointer-like
// location ("" for the document, "/tests/0" for an element); it is built
// from field names and indices, never from values.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "json: " + e.Reason
	}
	return "json: " + e.Path + ": " + e.Reason
}

// ErrTooLarge is returned by DecodeReader when the input exceeds its limit.
var ErrTooLarge = errors.New("json: document too large")

// Decode strictly decodes data into v, which must be a non-nil pointer.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &Error{Reason: "decode target must be a non-nil pointer"}
	}
	if err := Check(data, rv.Type().Elem()); err != nil {
		return err
	}
	fresh := reflect.New(rv.Type().Elem())
	if err := json.Unmarshal(data, fresh.Interface()); err != nil {
		return &Error{Reason: "value does not fit its field"}
	}
	rv.Elem().Set(fresh.Elem())
	return nil
}

// DecodeReader reads at most limit bytes from r and decodes them strictly.
// Input longer than limit yields ErrTooLarge.
func DecodeReader(r io.Reader, limit int64, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("json: read: %w", err)
	}
	if int64(len(data)) > limit {
		return ErrTooLarge
	}
	return Decode(data, v)
}

// Check validates data against the shape of type t without storing it.
func Check(data []byte, t reflect.Type) error {
	if !utf8.Valid(data) {
		return &Error{Reason: "invalid UTF-8"}
	}
	if err := checkEscapes(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec}
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
func checkEscapes(data []byte) error {
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
		r, ok := hex4(data, i+2)
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
			lo, ok := hex4(data, i+8)
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

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

type walker struct {
	dec *json.Decoder
}

var (
	rawMessageType      = reflect.TypeOf(json.RawMessage(nil))
	jsonUnmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// opaque reports whether t takes any JSON value, checked only for duplicate
// keys, depth and nulls.
func opaque(t reflect.Type) bool {
	return t == rawMessageType || t.Kind() == reflect.Interface ||
		(t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(jsonUnmarshalerType) && !reflect.PointerTo(t).Implements(textUnmarshalerType))
}

func (w *walker) value(t reflect.Type, path string, depth int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return &Error{Path: path, Reason: "malformed JSON"}
	}
	return w.token(tok, t, path, depth)
}

func (w *walker) token(tok json.Token, t reflect.Type, path string, depth int) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && opaque(t) {
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
		if t != nil && t.Kind() != reflect.String && !reflect.PointerTo(t).Implements(textUnmarshalerType) {
			return &Error{Path: path, Reason: "expected " + kindName(t) + ", got string"}
		}
	case json.Number:
		return number(tok, t, path)
	}
	return nil
}

func number(n json.Number, t reflect.Type, path string) error {
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

func (w *walker) object(t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch {
		case t.Kind() == reflect.Struct:
			fields = structFields(t)
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

func (w *walker) array(t reflect.Type, path string, depth int) error {
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

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "value"
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields maps each exact JSON name of t to its field type, following
// encoding/json's rules for tags, "-" and embedded structs.
func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type)
	collectFields(t, m)
	fieldCache.Store(t, m)
	return m
}

func collectFields(t reflect.Type, m map[string]reflect.Type) {
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
				collectFields(ft, m)
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

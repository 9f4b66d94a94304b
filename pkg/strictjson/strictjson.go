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
	s := scanner{data: data}
	if err := s.value(shapeOf(t), 0); err != nil {
		return err
	}
	s.space()
	if s.i != len(s.data) {
		return &Error{Reason: "trailing data after the value"}
	}
	return nil
}

// checkEscapes rejects \u escapes that do not form valid UTF-16: a high
// surrogate must be followed by a low surrogate, and a low surrogate may not
// stand alone. A backslash only ever appears inside strings in valid JSON, so
// no string tracking is needed; malformed JSON is left to the scanner.
func checkEscapes(data []byte) error {
	for i := 0; i < len(data); i++ {
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			return nil
		}
		i += j
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

// hex4 reads the four hex digits at data[at:].
func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// scanner walks a document once, checking JSON syntax and the target's
// shape together, in document order: the first problem found is the one
// reported. path is the way to the value being checked, turned into a
// string only for an error.
type scanner struct {
	data  []byte
	i     int
	path  [MaxDepth + 1]pathStep
	depth int // steps in path
}

// pathStep is one step of a path: a struct field name, "*" for a map or
// opaque object key (data, never echoed), or ("") an array index.
type pathStep struct {
	name string
	idx  int
}

func (s *scanner) fail(reason string) error {
	var b strings.Builder
	for _, p := range s.path[:s.depth] {
		b.WriteByte('/')
		if p.name != "" {
			b.WriteString(p.name)
		} else {
			b.WriteString(strconv.Itoa(p.idx))
		}
	}
	return &Error{Path: b.String(), Reason: reason}
}

func (s *scanner) malformed() error { return s.fail("malformed JSON") }

// push enters a member or element; the nesting bound keeps the path within
// its array (at most MaxDepth containers, one step each).
func (s *scanner) push(p pathStep) {
	s.path[s.depth] = p
	s.depth++
}

func (s *scanner) pop() { s.depth-- }

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value checks one value of shape sh (nil: any value) at s.path.
func (s *scanner) value(sh *shape, depth int) error {
	s.space()
	if s.i >= len(s.data) {
		return s.malformed()
	}
	switch c := s.data[s.i]; c {
	case '{', '[':
		if depth >= MaxDepth {
			return s.fail("nesting too deep")
		}
		s.i++
		if c == '{' {
			return s.object(sh, depth+1)
		}
		return s.array(sh, depth+1)
	case '"':
		content, escaped, ok := s.str()
		if !ok {
			return s.malformed()
		}
		if sh != nil && !sh.text {
			return s.fail("expected " + sh.name + ", got string")
		}
		if sh != nil && sh.textType != nil {
			return s.checkText(content, escaped, sh)
		}
	case 't', 'f':
		lit := "false"
		if c == 't' {
			lit = "true"
		}
		if !s.literal(lit) {
			return s.malformed()
		}
		if sh != nil && sh.kind != reflect.Bool {
			return s.fail("expected " + sh.name + ", got boolean")
		}
	case 'n':
		if !s.literal("null") {
			return s.malformed()
		}
		return s.fail("null is not allowed")
	default:
		n, ok := s.number()
		if !ok {
			return s.malformed()
		}
		return s.checkNumber(n, sh)
	}
	return nil
}

func (s *scanner) literal(lit string) bool {
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans a JSON number and returns its text.
func (s *scanner) number() ([]byte, bool) {
	d, i := s.data, s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return nil, false
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return nil, false
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	n := d[s.i:i]
	s.i = i
	return n, true
}

// str scans the string that starts at the current quote and returns its
// content (between the quotes) and whether it contains escapes.
func (s *scanner) str() (content []byte, escaped, ok bool) {
	d := s.data
	start := s.i + 1
	for i := start; i < len(d); {
		switch c := d[i]; {
		case c == '"':
			s.i = i + 1
			return d[start:i], escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return nil, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(d, i+2); !ok {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			i++
		}
	}
	return nil, false, false
}

// key scans an object key and returns it unescaped.
func (s *scanner) key() ([]byte, bool) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return nil, false
	}
	k, escaped, ok := s.str()
	if !ok {
		return nil, false
	}
	if escaped {
		k, _ = Unescape(k) // str has checked every escape
	}
	return k, true
}

// checkText runs the target's UnmarshalText on a string's content, so a
// value its type refuses is reported at its path. The reason names the
// type, never the value or the type's own error text.
func (s *scanner) checkText(content []byte, escaped bool, sh *shape) error {
	if escaped {
		var ok bool
		if content, ok = Unescape(content); !ok {
			return s.malformed()
		}
	}
	u := reflect.New(sh.textType).Interface().(encoding.TextUnmarshaler)
	if err := u.UnmarshalText(content); err != nil {
		return s.fail("not a valid " + sh.name)
	}
	return nil
}

// checkNumber checks a number's text against sh.
func (s *scanner) checkNumber(n []byte, sh *shape) error {
	if sh == nil {
		return nil
	}
	var ok bool
	switch sh.kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		ok = fitsInt(n, sh.bits)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		ok = fitsUint(n, sh.bits)
	case reflect.Float32, reflect.Float64:
		_, err := strconv.ParseFloat(string(n), sh.bits)
		ok = err == nil
	default:
		return s.fail("expected " + sh.name + ", got number")
	}
	if !ok {
		return s.fail("number out of range or not a " + sh.name)
	}
	return nil
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return len(b) > 0
}

// fitsInt reports whether strconv.ParseInt(n, 10, bits) succeeds, without
// calling it for the short plain integers that fill real documents.
func fitsInt(n []byte, bits int) bool {
	neg := len(n) > 0 && n[0] == '-'
	digits := n
	if neg {
		digits = n[1:]
	}
	if len(digits) > 18 || !allDigits(digits) {
		_, err := strconv.ParseInt(string(n), 10, bits)
		return err == nil
	}
	var v int64
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if bits >= 64 {
		return true
	}
	lim := int64(1) << (bits - 1)
	return v >= -lim && v < lim
}

// fitsUint is fitsInt for strconv.ParseUint.
func fitsUint(n []byte, bits int) bool {
	if len(n) > 19 || !allDigits(n) {
		_, err := strconv.ParseUint(string(n), 10, bits)
		return err == nil
	}
	var v uint64
	for _, c := range n {
		v = v*10 + uint64(c-'0')
	}
	return bits >= 64 || v < uint64(1)<<bits
}

// keySet remembers the keys of one object: struct fields by index in a
// bit set, other keys in a short list and, once there are many, a map.
type keySet struct {
	fields uint64
	small  [16][]byte
	n      int
	many   map[string]bool
}

// add adds k and reports whether it was already there.
func (ks *keySet) add(k []byte) bool {
	if ks.many != nil {
		if ks.many[string(k)] {
			return true
		}
		ks.many[string(k)] = true
		return false
	}
	for _, x := range ks.small[:ks.n] {
		if bytes.Equal(x, k) {
			return true
		}
	}
	if ks.n < len(ks.small) {
		ks.small[ks.n] = k
		ks.n++
		return false
	}
	ks.many = make(map[string]bool, 4*len(ks.small))
	for _, x := range ks.small {
		ks.many[string(x)] = true
	}
	ks.many[string(k)] = true
	return false
}

// addField adds struct field f and reports whether it was already there.
func (ks *keySet) addField(f field, k []byte) bool {
	if f.index >= 64 {
		return ks.add(k)
	}
	dup := ks.fields&(1<<f.index) != 0
	ks.fields |= 1 << f.index
	return dup
}

// object checks the members of an object whose '{' was consumed.
func (s *scanner) object(sh *shape, depth int) error {
	var elem *shape
	isStruct := false
	if sh != nil {
		switch {
		case sh.kind == reflect.Struct:
			isStruct = true
		case sh.stringMap:
			elem = sh.elem
		default:
			return s.fail("expected " + sh.name + ", got object")
		}
	}
	var seen keySet
	for n := 0; ; n++ {
		s.space()
		if s.i >= len(s.data) {
			return s.malformed()
		}
		if c := s.data[s.i]; c == '}' {
			s.i++
			return nil
		} else if n > 0 {
			if c != ',' {
				return s.malformed()
			}
			s.i++
			s.space()
		}
		k, ok := s.key()
		if !ok {
			return s.malformed()
		}
		// Only struct field names are ours; map and opaque keys are data
		// and never appear in an error.
		child, ft, dup := pathStep{name: "*"}, elem, false
		if isStruct {
			f, known := sh.fields[string(k)]
			if !known {
				return s.fail("unknown field")
			}
			child.name, ft = f.name, f.shape
			dup = seen.addField(f, k)
		} else {
			dup = seen.add(k)
		}
		s.push(child)
		if dup {
			return s.fail("duplicate key")
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.malformed()
		}
		s.i++
		if err := s.value(ft, depth); err != nil {
			return err
		}
		s.pop()
	}
}

// array checks the elements of an array whose '[' was consumed.
func (s *scanner) array(sh *shape, depth int) error {
	var elem *shape
	limit := -1
	if sh != nil {
		switch sh.kind {
		case reflect.Slice:
			elem = sh.elem
		case reflect.Array:
			elem, limit = sh.elem, sh.length
		default:
			return s.fail("expected " + sh.name + ", got array")
		}
	}
	for i := 0; ; i++ {
		s.space()
		if s.i >= len(s.data) {
			return s.malformed()
		}
		switch s.data[s.i] {
		case ']':
			s.i++
			return nil
		case '}':
			return s.malformed()
		}
		if limit >= 0 && i >= limit {
			return s.fail("too many elements")
		}
		s.push(pathStep{idx: i})
		if i > 0 {
			if s.data[s.i] != ',' {
				return s.malformed()
			}
			s.i++
		}
		if err := s.value(elem, depth); err != nil {
			return err
		}
		s.pop()
	}
}

// shape is what Check needs to know about a target type. Pointers are
// followed; a type that takes any JSON value (json.RawMessage, an
// interface, a json.Unmarshaler that is not an encoding.TextUnmarshaler)
// has the nil shape and is checked only for duplicate keys, depth and
// nulls.
type shape struct {
	kind      reflect.Kind
	bits      int              // numbers
	name      string           // kindName, for errors
	text      bool             // a JSON string fits: a string kind or a TextUnmarshaler
	textType  reflect.Type     // a TextUnmarshaler decoded through UnmarshalText: checked by it
	fields    map[string]field // structs: every exact JSON name
	stringMap bool             // a map with string keys
	elem      *shape           // maps, slices, arrays
	length    int              // arrays
}

// field is one JSON name of a struct.
type field struct {
	name  string
	index int // distinct per name within its struct
	shape *shape
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

// shapes caches complete shapes by type (a cache, like encoding/json's:
// every entry is derived from its key alone). shapeMu serialises
// building, so a shape is published only once its whole graph is built.
var (
	shapes  sync.Map // reflect.Type -> *shape
	shapeMu sync.Mutex
)

func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	shapeMu.Lock()
	defer shapeMu.Unlock()
	built := map[reflect.Type]*shape{}
	s := buildShape(t, built)
	for k, v := range built {
		shapes.Store(k, v)
	}
	shapes.Store(t, s)
	return s
}

// buildShape returns the shape of t, adding every shape it creates to
// built (which also breaks cycles of recursive types).
func buildShape(t reflect.Type, built map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return nil
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	if s, ok := built[t]; ok {
		return s
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) && !reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		// encoding/json decodes only a JSON string into it, through
		// UnmarshalText; name is the type's Go name, for errors.
		s := &shape{kind: reflect.String, name: textName(t), length: -1, text: true, textType: t}
		built[t] = s
		return s
	}
	s := &shape{kind: t.Kind(), name: kindName(t), length: -1,
		text: t.Kind() == reflect.String || reflect.PointerTo(t).Implements(textUnmarshalerType)}
	built[t] = s
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		s.bits = t.Bits()
	case reflect.Struct:
		types := map[string]reflect.Type{}
		var order []string
		collectFields(t, types, &order)
		s.fields = make(map[string]field, len(order))
		for i, name := range order {
			s.fields[name] = field{name: name, index: i, shape: buildShape(types[name], built)}
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			s.stringMap = true
			s.elem = buildShape(t.Elem(), built)
		}
	case reflect.Slice:
		s.elem = buildShape(t.Elem(), built)
	case reflect.Array:
		s.elem, s.length = buildShape(t.Elem(), built), t.Len()
	}
	return s
}

// collectFields maps each exact JSON name of t to its field type, following
// encoding/json's rules for tags, "-" and embedded structs; order lists
// the names once each.
func collectFields(t reflect.Type, m map[string]reflect.Type, order *[]string) {
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
				collectFields(ft, m, order)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := m[name]; !ok {
			*order = append(*order, name)
		}
		m[name] = f.Type
	}
}

// textName names a text type for errors: its Go type name in lower case
// ("duration"), or "value" for an unnamed type.
func textName(t reflect.Type) string {
	if t.Name() == "" {
		return "value"
	}
	return strings.ToLower(t.Name())
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

package conformance

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// field is one key of a raw JSON object with its value already encoded.
type field struct {
	key string
	raw string
}

// object is an ordered JSON object built byte by byte, so scenarios can send
// exactly the malformations they name (duplicate keys, case variants, odd
// types) that a struct encoder would never produce.
type object []field

// obj builds an object from alternating keys and raw JSON values.
func obj(pairs ...string) object {
	o := make(object, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		o = append(o, field{pairs[i], pairs[i+1]})
	}
	return o
}

// json returns the compact encoding of o.
func (o object) json() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(str(f.key))
		b.WriteByte(':')
		b.WriteString(f.raw)
	}
	b.WriteByte('}')
	return b.String()
}

// line returns the compact encoding of o followed by LF.
func (o object) line() string { return o.json() + "\n" }

// set returns a copy of o with key's value replaced (or appended when
// absent).
func (o object) set(key, raw string) object {
	c := o.clone()
	for i := range c {
		if c[i].key == key {
			c[i].raw = raw
			return c
		}
	}
	return append(c, field{key, raw})
}

// drop returns a copy of o without key.
func (o object) drop(key string) object {
	c := make(object, 0, len(o))
	for _, f := range o {
		if f.key != key {
			c = append(c, f)
		}
	}
	return c
}

// add returns a copy of o with one more field at the end, even when key is
// already present (a duplicate).
func (o object) add(key, raw string) object {
	return append(o.clone(), field{key, raw})
}

// rename returns a copy of o where key is spelled as to.
func (o object) rename(key, to string) object {
	c := o.clone()
	for i := range c {
		if c[i].key == key {
			c[i].key = to
		}
	}
	return c
}

// get returns the raw value of key ("" when absent).
func (o object) get(key string) string {
	for _, f := range o {
		if f.key == key {
			return f.raw
		}
	}
	return ""
}

func (o object) clone() object { return append(object(nil), o...) }

// str returns s as a JSON string literal without HTML escaping.
func str(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		// Only invalid UTF-8 makes Encode fail, and it replaces that
		// instead; keep a valid literal either way.
		return `""`
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// num returns n as a JSON number.
func num(n int64) string { return strconv.FormatInt(n, 10) }

// caps returns a JSON array of capability names.
func caps(cs ...plugin.Capability) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = str(string(c))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// limitsObject is the exact v1 limits object, keys in canonical order.
func limitsObject() object {
	l := plugin.V1Limits()
	return obj(
		"frame_bytes", num(l.FrameBytes),
		"progress_frames", num(l.ProgressFrames),
		"text_bytes", num(l.TextBytes),
		"progress_text_bytes", num(l.ProgressTextBytes),
		"commit_subject_bytes", num(l.CommitSubjectBytes),
	)
}

// header returns the common fields of every frame.
func header(id string, t plugin.Type) object {
	return obj("version", str(plugin.Version), "id", str(id), "type", str(string(t)))
}

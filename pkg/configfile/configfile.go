package configfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Error is a refused configuration. Config names the file kind ("gate",
// "worker"); Field is the offending field in FieldPath notation, "" for the
// file as a whole; Reason is fixed text. None of them holds a value from
// the file or the environment.
type Error struct {
	Config string
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Config + " config: " + e.Reason
	}
	return e.Config + " config: " + e.Field + ": " + e.Reason
}

// Validator is a configuration file's Go type: Validate checks what
// decoding cannot (ranges, relations between fields) and returns *Error.
type Validator interface {
	Validate() error
}

// Format describes one kind of configuration file.
type Format struct {
	Config   string // the file kind, for errors: "gate", "worker"
	Version  int    // the only value of "version" this build reads
	MaxBytes int64  // the largest file accepted
}

// Errorf returns an *Error of f's kind for field.
func (f Format) Errorf(field, format string, args ...any) error {
	return &Error{Config: f.Config, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Load reads one file of format f from r into v and validates it, in the
// order the package documentation gives. On error v may be partly written
// only by Validate; callers discard it.
func (f Format) Load(r io.Reader, v Validator) error {
	data, err := io.ReadAll(io.LimitReader(r, f.MaxBytes+1))
	if err != nil {
		return f.Errorf("", "cannot read")
	}
	if int64(len(data)) > f.MaxBytes {
		return f.Errorf("", "file larger than %d bytes", f.MaxBytes)
	}
	if err := f.checkVersion(data); err != nil {
		return err
	}
	if err := strictjson.Decode(data, v); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return f.Errorf(FieldPath(se.Path), "%s", se.Reason)
		}
		return f.Errorf("", "malformed JSON")
	}
	return v.Validate()
}

// checkVersion refuses a document whose top-level "version" is missing or
// not f.Version. A document that is not a JSON object is left to the
// strict decoder, which says what is wrong with it.
func (f Format) checkVersion(data []byte) error {
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	if json.Unmarshal(data, &head) != nil {
		return nil
	}
	if string(head.Version) != strconv.Itoa(f.Version) {
		return f.Errorf("version", "must be %d", f.Version)
	}
	return nil
}

// FieldPath turns a strictjson path ("/workers/0/id") into the notation of
// Error.Field ("workers[0].id").
func FieldPath(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if seg == "" {
			continue
		}
		if seg[0] >= '0' && seg[0] <= '9' {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// Prefix returns err with section prepended to its Field when err is an
// *Error (a section type's Validate reports fields relative to itself);
// any other error is returned unchanged.
func Prefix(section string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	out := *e
	if out.Field == "" {
		out.Field = section
	} else if out.Field[0] == '[' {
		out.Field = section + out.Field
	} else {
		out.Field = section + "." + out.Field
	}
	return &out
}

package plugin

import (
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// wireFrameType is the shape strictjson checks every frame against.
var wireFrameType = reflect.TypeFor[wireFrame]()

// extractFrame copies the values of line into w. line must already have
// passed compact and strictjson.Check against wireFrameType: valid UTF-8,
// valid JSON without whitespace outside strings, known keys only, each at
// most once, values of the right JSON types and ranges, no null. So this
// is a walk over a known-good document, not a parser; it still reports
// false, instead of guessing, on anything it does not expect.
//
// It replaces the second pass strictjson.Decode makes through
// encoding/json: a plugin process decodes only two or three frames in its
// life, and the reflection set-up of encoding/json cost more than the frames
// (measured: ~0.15 ms CPU per plugin process).
func extractFrame(line []byte, w *wireFrame) bool {
	x := extractor{data: line}
	ok := x.object(func(key string) bool {
		switch key {
		case "version":
			return x.stringPtr(&w.Version)
		case "id":
			return x.stringPtr(&w.ID)
		case "type":
			return x.stringPtr(&w.Type)
		case "capabilities":
			return x.stringsPtr(&w.Capabilities)
		case "limits":
			w.Limits = &wireLimits{}
			return x.limits(w.Limits)
		case "operation":
			return x.stringPtr(&w.Operation)
		case "input":
			return x.stringPtr(&w.Input)
		case "workspace":
			return x.stringPtr(&w.Workspace)
		case "instruction":
			return x.stringPtr(&w.Instruction)
		case "timeout_ms":
			return x.intPtr(&w.TimeoutMS)
		case "sequence":
			return x.intPtr(&w.Sequence)
		case "stage":
			return x.stringPtr(&w.Stage)
		case "text":
			return x.stringPtr(&w.Text)
		case "output":
			return x.stringPtr(&w.Output)
		case "commit_subject":
			return x.stringPtr(&w.CommitSubject)
		case "summary":
			return x.stringPtr(&w.Summary)
		case "changes":
			return x.stringsPtr(&w.Changes)
		case "category":
			return x.stringPtr(&w.Category)
		}
		return false
	})
	return ok && x.i == len(x.data)
}

type extractor struct {
	data []byte
	i    int
}

func (x *extractor) next(c byte) bool {
	if x.i < len(x.data) && x.data[x.i] == c {
		x.i++
		return true
	}
	return false
}

// object walks {"key":value,...}, calling member for each key with x
// positioned at its value.
func (x *extractor) object(member func(key string) bool) bool {
	if !x.next('{') {
		return false
	}
	if x.next('}') {
		return true
	}
	for {
		key, ok := x.str()
		if !ok || !x.next(':') || !member(key) {
			return false
		}
		if x.next('}') {
			return true
		}
		if !x.next(',') {
			return false
		}
	}
}

func (x *extractor) limits(l *wireLimits) bool {
	return x.object(func(key string) bool {
		switch key {
		case "frame_bytes":
			return x.intPtr(&l.FrameBytes)
		case "progress_frames":
			return x.intPtr(&l.ProgressFrames)
		case "text_bytes":
			return x.intPtr(&l.TextBytes)
		case "progress_text_bytes":
			return x.intPtr(&l.ProgressTextBytes)
		case "commit_subject_bytes":
			return x.intPtr(&l.CommitSubjectBytes)
		}
		return false
	})
}

func (x *extractor) stringPtr(p **string) bool {
	s, ok := x.str()
	*p = &s
	return ok
}

func (x *extractor) stringsPtr(p **[]string) bool {
	if !x.next('[') {
		return false
	}
	list := []string{}
	*p = &list
	if x.next(']') {
		return true
	}
	for {
		s, ok := x.str()
		if !ok {
			return false
		}
		list = append(list, s)
		if x.next(']') {
			return true
		}
		if !x.next(',') {
			return false
		}
	}
}

// intPtr reads an integer (strictjson has checked it is one and fits).
func (x *extractor) intPtr(p **int64) bool {
	start := x.i
	for x.i < len(x.data) && (x.data[x.i] == '-' || x.data[x.i] >= '0' && x.data[x.i] <= '9') {
		x.i++
	}
	n, err := strconv.ParseInt(string(x.data[start:x.i]), 10, 64)
	*p = &n
	return err == nil
}

// str reads a string and returns its unescaped value.
func (x *extractor) str() (string, bool) {
	if !x.next('"') {
		return "", false
	}
	start, escaped := x.i, false
	for ; x.i < len(x.data); x.i++ {
		switch x.data[x.i] {
		case '\\':
			escaped = true
			x.i++
		case '"':
			raw := x.data[start:x.i]
			x.i++
			if !escaped {
				return string(raw), true
			}
			return unescape(raw)
		}
	}
	return "", false
}

// unescape decodes the escapes of a string's content as encoding/json does
// (a surrogate that is not part of a pair, which strictjson rejects
// anyway, becomes U+FFFD).
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(raw) {
			return "", false
		}
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw, i+1)
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2, ok2 = hex4(raw, i+3)
				}
				if pair := utf16.DecodeRune(r, r2); ok2 && pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), true
}

// hex4 reads four hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

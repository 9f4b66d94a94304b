package plugin

import (
	"strconv"
	"unicode/utf8"
)

// AppendFrame validates f (see Frame.Validate) and appends its canonical
// encoding to dst: compact JSON with keys in a fixed order (version, id,
// type, then the type's fields in the order of Frame), strings escaped as
// encoding/json escapes them without HTML escaping, then one LF.
//
// The encoder writes the bytes directly rather than through encoding/json:
// a plugin encodes only a handful of frames in its short life, and the
// reflection set-up of encoding/json would cost more than the frames.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return dst, err
	}
	start := len(dst)
	b := append(dst, `{"version":"`...)
	b = append(b, Version...)
	b = append(b, `","id":`...)
	b = appendString(b, f.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, string(f.Type))
	switch f.Type {
	case TypeInitialize, TypeInitialized:
		b = append(b, `,"capabilities":[`...)
		for i, c := range f.Capabilities {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(c))
		}
		b = append(b, ']')
		if f.Type == TypeInitialize {
			l := f.Limits
			b = appendInt(b, `,"limits":{"frame_bytes":`, l.FrameBytes)
			b = appendInt(b, `,"progress_frames":`, l.ProgressFrames)
			b = appendInt(b, `,"text_bytes":`, l.TextBytes)
			b = appendInt(b, `,"progress_text_bytes":`, l.ProgressTextBytes)
			b = appendInt(b, `,"commit_subject_bytes":`, l.CommitSubjectBytes)
			b = append(b, '}')
		}
	case TypeExecute:
		b = appendField(b, "operation", string(f.Operation))
		if f.Operation == OpText {
			b = appendField(b, "input", f.Input)
		} else {
			b = appendField(b, "workspace", f.Workspace)
			b = appendField(b, "instruction", f.Instruction)
			b = appendInt(b, `,"timeout_ms":`, f.TimeoutMS)
		}
	case TypeProgress:
		b = appendInt(b, `,"sequence":`, f.Sequence)
		b = appendField(b, "stage", string(f.Stage))
		b = appendField(b, "text", f.Text)
	case TypeResult:
		if f.Output != nil {
			b = appendField(b, "output", *f.Output)
		}
		if f.CommitSubject != nil {
			b = appendField(b, "commit_subject", *f.CommitSubject)
		}
		if f.Summary != nil {
			b = appendField(b, "summary", *f.Summary)
		}
		if f.Changes != nil {
			b = append(b, `,"changes":[`...)
			for i, c := range f.Changes {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, c)
			}
			b = append(b, ']')
		}
	case TypeFailure:
		b = appendField(b, "category", string(f.Category))
	}
	b = append(b, '}')
	if len(b)-start > FrameBytes {
		return dst, invalid("frame exceeds %d bytes", FrameBytes)
	}
	return append(b, '\n'), nil
}

// appendField appends ,"key":"value" (key needs no escaping).
func appendField(b []byte, key, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendInt appends prefix (a comma, key and colon) and n.
func appendInt(b []byte, prefix string, n int64) []byte {
	return strconv.AppendInt(append(b, prefix...), n, 10)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does
// with HTML escaping off: quote and backslash escaped, control characters
// as \b \f \n \r \t or \u00xx, U+2028 and U+2029 as \u2028 and \u2029,
// invalid UTF-8 as \ufffd (Validate already rejects it), DEL and every
// other character as is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

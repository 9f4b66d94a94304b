package intake

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Forbidden reports whether r is stripped from issue text: every control
// character except newline and tab (C0, DEL, C1), every format character
// (Unicode category Cf: the bidi embeddings, overrides and isolates
// U+202A–202E and U+2066–2069, the marks U+200E/200F and U+061C, the zero
// widths U+200B–200D, U+2060–2064, U+FEFF, the soft hyphen U+00AD and the
// tag characters U+E0000–E007F among them), the line and paragraph
// separators U+2028/2029, the variation selectors U+FE00–FE0F and
// U+E0100–E01EF, the combining grapheme joiner U+034F, the Hangul fillers
// U+115F, U+1160, U+3164 and U+FFA0, and the noncharacters (U+FDD0–FDEF,
// U+xxFFFE/xxFFFF). Carriage returns are not kept either: clean turns
// CRLF and a lone CR into a newline first.
func Forbidden(r rune) bool {
	switch {
	case r >= 0x20 && r < 0x7f, r == '\n', r == '\t':
		return false
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029 || r == 0x034f:
		return true
	case r >= 0xfe00 && r <= 0xfe0f || r >= 0xe0100 && r <= 0xe01ef:
		return true
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0:
		return true
	case r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// clean is one part of issue text made safe to show: cut to rawBytes
// on a rune boundary (reported), invalid UTF-8 replaced by U+FFFD, line ends made newlines,
// forbidden runes dropped, HTML comments removed.
func clean(s string, rawBytes int) (string, bool) {
	cut := false
	if len(s) > rawBytes {
		s, cut = cutRunes(s, rawBytes), true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				continue
			}
			b.WriteByte('\n')
		case !Forbidden(r):
			b.WriteRune(r)
		}
	}
	return stripComments(b.String()), cut
}

// stripComments removes HTML comments in one pass: from "<!--" to the
// next "-->" (also the short forms "<!-->" and "<!--->"), or to the end
// when none follows, as GitHub hides an unterminated one. An opener that
// only forms once text around a removed comment joins ("<!<!-- x -->--")
// opens a comment too, so no "<!--" survives: text is dropped, never
// revealed.
func stripComments(s string) string {
	if !strings.Contains(s, "<!--") {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if !hasOpener(out) {
			continue
		}
		out = out[:len(out)-4]
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, ">"):
			i++
		case strings.HasPrefix(rest, "->"):
			i += 2
		default:
			end := strings.Index(rest, "-->")
			if end < 0 {
				return string(out)
			}
			i += end + 3
		}
	}
	return string(out)
}

func hasOpener(b []byte) bool {
	n := len(b)
	return n >= 4 && b[n-4] == '<' && b[n-3] == '!' && b[n-2] == '-' && b[n-1] == '-'
}

// cutRunes returns the longest prefix of the UTF-8 text s of at most max
// bytes that ends on a rune boundary.
func cutRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// bound cuts s to max bytes including mark, which is appended when s was
// cut here or before (cut).
func bound(s string, max int, cut bool, mark string) string {
	if len(s) <= max && !cut {
		return s
	}
	if len(s)+len(mark) > max {
		s = cutRunes(s, max-len(mark))
	}
	return s + mark
}

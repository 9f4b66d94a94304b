package strictjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzStrings: AppendString writes what encoding/json writes (HTML
// escaping off), and Unescape of that content gives the string back when
// it is valid UTF-8; Unescape agrees with encoding/json on any content it
// accepts.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{"", "plain", `quote" back\slash /`, "\x00\x1f\x7f\b\f\n\r\t", "<&>", "\u2028\u2029", "\xff", "é€𝄞", `\ud83d\ude00`, `\ud800`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		got := AppendString([]byte("x"), s)
		if !bytes.Equal(got[1:], want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got[1:], want)
		}
		back, ok := Unescape(got[2 : len(got)-1])
		if utf8.ValidString(s) && (!ok || string(back) != s) {
			t.Fatalf("Unescape(AppendString(%q)) = %q, %v", s, back, ok)
		}
		// s taken as string content: what Unescape accepts, encoding/json
		// decodes to the same text.
		if dec, ok := Unescape([]byte(s)); ok {
			var ref string
			if err := json.Unmarshal([]byte(`"`+s+`"`), &ref); err == nil && ref != string(dec) && utf8.ValidString(s) {
				t.Fatalf("Unescape(%q) = %q, encoding/json %q", s, dec, ref)
			}
		}
	})
}

func TestUnescapeRejects(t *testing.T) {
	for _, c := range []string{`\`, `\x`, `\u12`, `\u12g4`, `\ud800`, `\ud800\u0041`, `\udc00`} {
		if _, ok := Unescape([]byte(c)); ok {
			t.Errorf("Unescape(%q) accepted", c)
		}
	}
	if got, ok := Unescape([]byte(`a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00`)); !ok || string(got) != "a\"\\/\b\f\n\r\t\u00e9\U0001F600" {
		t.Fatalf("Unescape = %q, %v", got, ok)
	}
}

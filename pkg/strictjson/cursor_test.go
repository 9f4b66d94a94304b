package strictjson

import "testing"

func TestCursorWalksADocument(t *testing.T) {
	doc := []byte(` { "s" : "a\"b\u00e9" , "n":-12 , "l":["x","y"], "o":{"k":[1,{"z":"}"}]}, "q":"2026-01-02T03:04:05Z" } `)
	c := NewCursor(doc)
	got := map[string]string{}
	ok := c.Object(func(key []byte) bool {
		switch string(key) {
		case "s":
			s, ok := c.Text()
			got["s"] = s
			return ok
		case "n":
			got["n"] = string(c.Number())
			return true
		case "l":
			return c.Array(func() bool {
				s, ok := c.Text()
				got["l"] += s
				return ok
			})
		case "o":
			v, ok := c.Value()
			got["o"] = string(v)
			return ok
		case "q":
			q, ok := c.Quoted()
			got["q"] = string(q)
			return ok
		}
		return false
	}) && c.End()
	want := map[string]string{"s": "a\"b\u00e9", "n": "-12", "l": "xy", "o": `{"k":[1,{"z":"}"}]}`, "q": `"2026-01-02T03:04:05Z"`}
	if !ok || len(got) != len(want) {
		t.Fatalf("walk = %v, %v", ok, got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestCursorReportsSurprises(t *testing.T) {
	for _, doc := range []string{`[]`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":1`, `"unterminated`} {
		c := NewCursor([]byte(doc))
		if c.Object(func([]byte) bool { c.Number(); return true }) && c.End() {
			t.Errorf("%q walked as a complete object", doc)
		}
	}
	for _, doc := range []string{`1`, `true`, `null`, `]`} {
		if _, ok := NewCursor([]byte(doc)).Value(); ok {
			t.Errorf("Value accepted %q", doc)
		}
	}
	if _, ok := NewCursor([]byte(`"bad \x"`)).Text(); ok {
		t.Error("Text accepted a malformed escape")
	}
}

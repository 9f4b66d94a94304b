package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseProviders(t *testing.T) {
	ok := func() FileProvider {
		return FileProvider{ID: "openai", Kind: "openai-responses", BaseURL: "https://api.openai.com/v1/", KeyEnv: "OPENAI_API_KEY",
			Headers: map[string]string{"openai-organization": "org-1", "X-Trace": "a b"}}
	}
	ps, err := ParseProviders([]FileProvider{ok()})
	if err != nil {
		t.Fatal(err)
	}
	if p := ps[0]; p.BaseURL.String() != "https://api.openai.com/v1" || len(p.Headers) != 2 || p.Headers[0] != [2]string{"Openai-Organization", "org-1"} {
		t.Errorf("parsed %+v", p)
	}
	for _, c := range []struct {
		name, field string
		edit        func(*FileProvider)
	}{
		{"id", "providers[0].id", func(p *FileProvider) { p.ID = "a/b" }},
		{"long id", "providers[0].id", func(p *FileProvider) { p.ID = strings.Repeat("a", 65) }},
		{"kind", "providers[0].kind", func(p *FileProvider) { p.Kind = "openai-chat" }},
		{"http", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "http://127.0.0.1:8080/v1" }},
		{"user", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https://u:p@api.openai.com" }},
		{"query", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https://api.openai.com/v1?x=1" }},
		{"fragment", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https://api.openai.com/#x" }},
		{"dotdot", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https://api.openai.com/v1/../x" }},
		{"escaped", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https://api.openai.com/v1%2Fx" }},
		{"port", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https://api.openai.com:0" }},
		{"no host", "providers[0].base_url", func(p *FileProvider) { p.BaseURL = "https:///v1" }},
		{"key env", "providers[0].key_env", func(p *FileProvider) { p.KeyEnv = "1X" }},
		{"missing key env", "providers[0].key_env", func(p *FileProvider) { p.KeyEnv = "" }},
		{"reserved header", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"authorization": "Bearer x"} }},
		{"goog key header", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"X-Goog-Api-Key": "k"} }},
		{"ws header", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"Sec-WebSocket-Key": "k"} }},
		{"bad name", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"a b": "k"} }},
		{"case twins", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"X-A": "1", "x-a": "2"} }},
		{"bad value", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"X-A": "a\r\nb"} }},
		{"empty value", "providers[0].headers", func(p *FileProvider) { p.Headers = map[string]string{"X-A": ""} }},
	} {
		p := ok()
		c.edit(&p)
		_, err := ParseProviders([]FileProvider{p})
		fe, isField := err.(*FieldError)
		if !isField || fe.Field != c.field {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	a, b := ok(), ok()
	if _, err := ParseProviders([]FileProvider{a, b}); err == nil || !strings.Contains(err.Error(), "providers[1].id: duplicates") {
		t.Errorf("duplicate id: %v", err)
	}
	b.ID = "other"
	if _, err := ParseProviders([]FileProvider{a, b}); err == nil || !strings.Contains(err.Error(), "providers[1].key_env: duplicates") {
		t.Errorf("shared key_env: %v", err)
	}
	many := make([]FileProvider, MaxProviders+1)
	if _, err := ParseProviders(many); err == nil {
		t.Error("too many providers accepted")
	}
}

// FuzzParseProviders: never panics; an accepted provider has an https
// base URL without a trailing slash and header names in canonical form;
// a refusal carries no value.
func FuzzParseProviders(f *testing.F) {
	f.Add(`[{"id":"openai","kind":"openai-responses","base_url":"https://api.openai.com/v1","key_env":"K","headers":{"x-a":"b"}}]`)
	f.Add(`[{"id":"g","kind":"gemini-generate-content","base_url":"https://h:443/","key_env":"G"}]`)
	f.Fuzz(func(t *testing.T, doc string) {
		var fps []FileProvider
		if json.Unmarshal([]byte(doc), &fps) != nil {
			return
		}
		ps, err := ParseProviders(fps)
		if err != nil {
			if ps != nil {
				t.Fatal("values with an error")
			}
			for _, fp := range fps {
				for _, v := range []string{fp.BaseURL, fp.KeyEnv} {
					if len(v) > 12 && strings.Contains(err.Error(), v) {
						t.Fatalf("error %q carries a value", err)
					}
				}
			}
			return
		}
		for _, p := range ps {
			if p.BaseURL.Scheme != "https" || strings.HasSuffix(p.BaseURL.Path, "/") {
				t.Fatalf("accepted %v", p.BaseURL)
			}
			for _, h := range p.Headers {
				if canonicalHeader(h[0]) != h[0] {
					t.Fatalf("header %q not canonical", h[0])
				}
			}
		}
	})
}

// FuzzMeter: never panics, never reports a negative count, and reports
// the same usage however the body is cut into chunks.
func FuzzMeter(f *testing.F) {
	f.Add([]byte(sseBody(`{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}`, `{"type":"message_delta","usage":{"output_tokens":9}}`)), 5, true)
	f.Add([]byte(`{"usage":{"input_tokens":1,"output_tokens":2,"input_tokens_details":{"cached_tokens":1}}}`), 3, false)
	f.Add([]byte("data: {\"usageMetadata\":{\"promptTokenCount\":-4}}\n"), 1, true)
	f.Fuzz(func(t *testing.T, body []byte, cut int, sse bool) {
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		for _, k := range Kinds {
			whole := newMeter(k, ct)
			whole.Write(body)
			whole.finish()
			parts := newMeter(k, ct)
			step := max(cut%64, 1)
			for i := 0; i < len(body); i += step {
				parts.Write(body[i:min(i+step, len(body))])
			}
			parts.finish()
			a, b := whole.take(), parts.take()
			if a != b {
				t.Fatalf("%s: %+v whole, %+v in parts", k, a, b)
			}
			if a.InputTokens < 0 || a.OutputTokens < 0 || a.CachedTokens < 0 {
				t.Fatalf("negative %+v", a)
			}
		}
	})
}

// FuzzFrameReader: never panics; the data messages seen do not depend on
// how the stream is cut into chunks.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{0x81, 0x02, 'h', 'i', 0x89, 0x00, 0x01, 0x01, 'a', 0x80, 0x01, 'b'}, 1)
	f.Add([]byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}, 3)
	f.Add([]byte{0x81, 0x7e, 0x00, 0x03, 'a', 'b', 'c', 0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0, 1, 'z'}, 2)
	f.Add([]byte{0x82, 0x01, 'x', 0xc1, 0x01, 'y'}, 1) // binary, then a frame with RSV1
	f.Fuzz(func(t *testing.T, stream []byte, cut int) {
		run := func(step int) ([]string, bool) {
			var msgs []string
			fr := &frameReader{onMessage: func(m []byte) bool { msgs = append(msgs, string(m)); return true }}
			for i := 0; i < len(stream); i += step {
				if !fr.feed(stream[i:min(i+step, len(stream))]) {
					return msgs, false
				}
			}
			return msgs, true
		}
		a, okA := run(len(stream) + 1)
		b, okB := run(max(cut%16, 1))
		if okA != okB || strings.Join(a, "\x00") != strings.Join(b, "\x00") || len(a) != len(b) {
			t.Fatalf("whole %q %v, in parts %q %v", a, okA, b, okB)
		}
	})
}

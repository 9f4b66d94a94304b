package providerfake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// A stream's events arrive as SSE, each data its fields plus the type;
// a cut stream delivers what was flushed and then fails the body (the
// chunked encoding is never ended).
func TestStreamEventsAndCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := StartStream(w)
		s.Event("first", map[string]any{"n": 1})
		if r.URL.Path == "/cut" {
			s.Cut()
			return
		}
		s.Event("second", map[string]any{})
		s.Flush()
	}))
	defer srv.Close()

	res, err := http.Get(srv.URL + "/whole")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	want := "event: first\ndata: {\"n\":1,\"type\":\"first\"}\n\nevent: second\ndata: {\"type\":\"second\"}\n\n"
	if string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}

	res, err = http.Get(srv.URL + "/cut")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	line, err := r.ReadString('\n')
	if err != nil || line != "event: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := io.ReadAll(r); err == nil {
		t.Error("a cut stream ended cleanly")
	}
}

func TestOnceLogTaskAnswer(t *testing.T) {
	var o Once
	if !o.First("a") || o.First("a") || !o.First("b") {
		t.Error("First does not report exactly the first time of each key")
	}

	var buf bytes.Buffer
	l := NewLog(&buf)
	l.Record(map[string]int{"x": 1})
	l.Record(map[string]int{"x": 2})
	if buf.String() != "{\"x\":1}\n{\"x\":2}\n" {
		t.Errorf("log %q", buf.String())
	}

	if p, txt := CreateTask("do it\nCreate a file named a/b.txt containing one line: hi there.\n"); p != "a/b.txt" || txt != "hi there" {
		t.Errorf("CreateTask = %q, %q", p, txt)
	}
	if p, txt := CreateTask("Create a file named ../x"); p != "" || txt != "" {
		t.Errorf("CreateTask without the sentence = %q, %q", p, txt)
	}

	props := map[string]json.RawMessage{"summary": nil, "changes": nil, "other": nil}
	got := Answer(props, "a.txt")
	want := map[string]any{"summary": "Added a.txt as the task asked.", "changes": []string{"a.txt: new file with one line"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Answer = %v, want %v", got, want)
	}
	if got := Answer(map[string]json.RawMessage{"commit_subject": nil}, ""); !strings.HasSuffix(got["commit_subject"].(string), "nothing") {
		t.Errorf("Answer without a path = %v", got)
	}
}

package providerfake

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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

// Run with a test authority serves TLS (trusted through the authority's
// file) and plain HTTP on one port, and OriginOf tells them apart, with
// the key, the gateway's header and a leaked credential.
func TestRunServesTLSAndPlainOnOnePort(t *testing.T) {
	dir := t.TempDir()
	addrFile, ca := filepath.Join(dir, "addr"), filepath.Join(dir, "ca.pem")
	origins := make(chan Origin, 4)
	go Run(addrFile, filepath.Join(dir, "log"), ca, func(*Log, int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origins <- OriginOf(r, "X-Api-Key", "sk-real-key-0123456789", "via-nonce")
		})
	})
	var addr string
	for i := 0; i < 200 && addr == ""; i++ {
		b, _ := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		time.Sleep(10 * time.Millisecond)
	}
	pem, err := os.ReadFile(ca)
	if err != nil || addr == "" {
		t.Fatalf("fake did not start: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	send := func(c *http.Client, url string, h map[string]string) Origin {
		req, _ := http.NewRequest("POST", url, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return <-origins
	}
	if o := send(tlsClient, "https://"+addr+"/v1", map[string]string{"X-Api-Key": "sk-real-key-0123456789", ViaHeader: "via-nonce"}); o != (Origin{TLS: true, ViaGateway: true, Authorized: true}) {
		t.Errorf("through the gateway: %+v", o)
	}
	if o := send(http.DefaultClient, "http://"+addr+"/v1", map[string]string{"X-Api-Key": "fgw-00", ViaHeader: "other"}); o != (Origin{Credential: true}) {
		t.Errorf("plain, with a credential: %+v", o)
	}
}

// Data writes an unnamed event (the Gemini API's shape): data only.
func TestStreamData(t *testing.T) {
	rec := httptest.NewRecorder()
	s := StartStream(rec)
	s.Data(map[string]any{"candidates": []any{}})
	s.Flush()
	if got, want := rec.Body.String(), "data: {\"candidates\":[]}\r\n\r\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
}

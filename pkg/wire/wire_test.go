package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/testseed"
	"golang.org/x/net/websocket"
)

func TestSeedsDecodeAndRoundTrip(t *testing.T) {
	for name, data := range testseed.Read(t, "testdata/seed/*.json") {
		t.Run(name, func(t *testing.T) {
			e, err := Decode(data)
			if strings.HasPrefix(name, "bad-") {
				if err == nil {
					t.Fatal("accepted an invalid message")
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			enc, err := Encode(e)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			again, err := Decode(enc)
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			enc2, _ := Encode(again)
			if !bytes.Equal(enc, enc2) {
				t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	sha := strings.Repeat("a", 40)
	cases := map[string]string{
		"empty":            ``,
		"not object":       `[]`,
		"unknown type":     `{"type":"ping","ping":{}}`,
		"no payload":       `{"type":"ack","seq":1}`,
		"two payloads":     `{"type":"ack","seq":1,"ack":{},"reject":{"code":"stale"}}`,
		"unknown field":    `{"type":"ack","seq":1,"ack":{},"extra":1}`,
		"dup key":          `{"type":"ack","seq":1,"seq":2,"ack":{}}`,
		"case variant":     `{"Type":"ack","seq":1,"ack":{}}`,
		"null":             `{"type":"ack","seq":1,"ack":null}`,
		"trailing":         `{"type":"ack","seq":1,"ack":{}} {}`,
		"ack without seq":  `{"type":"ack","ack":{}}`,
		"negative seq":     `{"type":"ack","seq":-1,"ack":{}}`,
		"heartbeat no seq": `{"type":"heartbeat","heartbeat":{"job_id":"j","attempt_id":"a"}}`,
		"lease with seq":   `{"type":"lease","seq":1,"lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"}}}`,
		"bad protocol":     `{"type":"hello","hello":{"protocol":"v2","worker_id":"w","slot":0,"plugins":[],"repositories":[]}}`,
		"bad worker id":    `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"W/1","slot":0,"plugins":[],"repositories":[]}}`,
		"slot too big":     `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":256,"plugins":[],"repositories":[]}}`,
		"dup plugin":       `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":["a","a"],"repositories":[]}}`,
		"bad generation":   `{"type":"welcome","welcome":{"lane":"w","generation":"XYZ"}}`,
		"bad lane":         `{"type":"welcome","welcome":{"lane":"w#0","generation":"0123456789abcdef0123456789abcdef"}}`,
		"lease ordinal 0":  `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":0,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":{},"task":{"input":"x"}}}`,
		"lease task kind":  `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"coding","policy":{},"task":{"input":"x"}}}`,
		"lease policy arr": `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-01-01T00:00:00Z","kind":"text","policy":[],"task":{"input":"x"}}}`,
		"lease bad time":   `{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"yesterday","kind":"text","policy":{},"task":{"input":"x"}}}`,
		"bad job ref":      `{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"../x","attempt_id":"a"}}`,
		"evidence batch 3": `{"type":"evidence","seq":1,"evidence":{"job_id":"j","attempt_id":"a","batch":3,"records":[{}]}}`,
		"evidence empty":   `{"type":"evidence","seq":1,"evidence":{"job_id":"j","attempt_id":"a","batch":1,"records":[]}}`,
		"evidence scalar":  `{"type":"evidence","seq":1,"evidence":{"job_id":"j","attempt_id":"a","batch":1,"records":[1]}}`,
		"result both":      `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"succeeded","output":"x","candidate_sha":"` + sha + `"}}`,
		"result neither":   `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"succeeded"}}`,
		"result bad sha":   `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"succeeded","candidate_sha":"ABC"}}`,
		"report on text":   `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"succeeded","output":"x","agent_report":{"summary":"s","changes":["c"]}}}`,
		"fail w/ output":   `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","output":"x","disposition":"retryable","failure_code":"execution_failed"}}`,
		"fail bad code":    `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","disposition":"retryable","failure_code":"Oops!"}}`,
		"fail bad disp":    `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","disposition":"maybe","failure_code":"invalid_task"}}`,
		"fail no code":     `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","disposition":"terminal","failure_code":""}}`,
		"fail long code":   `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","disposition":"terminal","failure_code":"` + strings.Repeat("a", 65) + `"}}`,
		"bad outcome":      `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"maybe"}}`,
		"reject code":      `{"type":"reject","seq":1,"reject":{"code":"nope"}}`,
		"cancel reason":    `{"type":"cancel","cancel":{"job_id":"j","attempt_id":"a","reason":"bored"}}`,
		// A takeover closes the old socket; no cancel is ever sent for it.
		"cancel superseded": `{"type":"cancel","cancel":{"job_id":"j","attempt_id":"a","reason":"superseded"}}`,
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(msg)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestEncodeNilListsAsEmpty(t *testing.T) {
	b, err := Encode(Envelope{Type: TypeHello, Hello: &Hello{Protocol: Protocol, WorkerID: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"plugins":[]`)) || !bytes.Contains(b, []byte(`"repositories":[]`)) {
		t.Fatalf("encoded %s", b)
	}
	if _, err := Decode(b); err != nil {
		t.Fatalf("own encoding rejected: %v", err)
	}
}

func TestDecodeTooLarge(t *testing.T) {
	big := []byte(`{"type":"ack","seq":1,"ack":{}}` + strings.Repeat(" ", MaxMessageBytes))
	if _, err := Decode(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

func TestErrorsAreValueFree(t *testing.T) {
	secret := "s3cr3t-value"
	msgs := []string{
		`{"type":"hello","hello":{"protocol":"` + secret + `","worker_id":"w","slot":0,"plugins":[],"repositories":[]}}`,
		`{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"` + secret + `!","attempt_id":"a"}}`,
		`{"type":"` + secret + `"}`,
		`{"` + secret + `":1}`,
	}
	for _, m := range msgs {
		_, err := Decode([]byte(m))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Fatalf("error %v for %s", err, m)
		}
	}
}

func TestParseTask(t *testing.T) {
	sha := "0123456789abcdef0123456789abcdef01234567"
	good := map[string]Kind{
		`{"input":"hello"}`: KindText,
		`{"repository_id":"agent-forge","base_sha":"` + sha + `","instruction":"Fix."}`:                                                                                                         KindCoding,
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"Fix.","tests":[["go","test"]],"commit_author_name":"Kri Cha","commit_author_email":"4619899+k@users.noreply.github.com"}`: KindCoding,
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"Fix.","tests":[]}`:                                                                                                        KindCoding,
	}
	for in, kind := range good {
		p, err := ParseTask([]byte(in))
		if err != nil || p.Kind != kind {
			t.Fatalf("%s: kind %q err %v", in, p.Kind, err)
		}
		if p2, err := ParseTask(p.Canonical); err != nil || p2.Kind != p.Kind || !bytes.Equal(p.Canonical, p2.Canonical) {
			t.Fatalf("canonical form does not round-trip: %s", p.Canonical)
		}
		if kind == KindCoding {
			c, err := DecodeCodingTask(p.Canonical)
			if err != nil || !reflect.DeepEqual(c, p.Coding) {
				t.Fatalf("%s: parsed coding task %+v, canonical decodes to %+v (%v)", in, p.Coding, c, err)
			}
		} else if !reflect.DeepEqual(p.Coding, CodingTask{}) {
			t.Fatalf("%s: text task carries coding fields %+v", in, p.Coding)
		}
	}
	long := strings.Repeat("x", MaxInputBytes+1)
	bad := map[string]string{
		`{}`:                                "repository_id",
		`{"input":""}`:                      "input",
		`{"input":"` + long + `"}`:          "input",
		`{"input":"x","repository_id":"r"}`: "input",
		`{"input":"x","extra":1}`:           "",
		`{"repository_id":"r","base_sha":"` + sha + `"}`:                                                                              "instruction",
		`{"repository_id":"r","base_sha":"ABC","instruction":"x"}`:                                                                    "base_sha",
		`{"repository_id":"R R","base_sha":"` + sha + `","instruction":"x"}`:                                                          "repository_id",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"  "}`:                                                           "instruction",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[[]]}`:                                               "tests",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[[""]]}`:                                             "tests",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[["a\u0000"]]}`:                                      "tests",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A"}`:                                   "commit_author_name",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_email":"a@b.c"}`:                              "commit_author_name",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":" A","commit_author_email":"a@b.c"}`:    "commit_author_name",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A<x>","commit_author_email":"a@b.c"}`:  "commit_author_name",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A\nB","commit_author_email":"a@b.c"}`:  "commit_author_name",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A","commit_author_email":"not-mail"}`:  "commit_author_email",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A","commit_author_email":"A <a@b.c>"}`: "commit_author_email",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A","commit_author_email":"a@b@c"}`:     "commit_author_email",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"A","commit_author_email":"a@b.c "}`:    "commit_author_email",
		`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","commit_author_name":"","commit_author_email":""}`:           "commit_author_name",
	}
	for in, field := range bad {
		_, err := ParseTask([]byte(in))
		if err == nil {
			t.Fatalf("accepted %s", in)
		}
		var fe *FieldError
		if field != "" && (!errors.As(err, &fe) || fe.Field != field) {
			t.Fatalf("%s: got %v, want field %s", in, err, field)
		}
	}
	tooMany := `{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[` + strings.Repeat(`["t"],`, MaxTests) + `["t"]]}`
	if _, err := ParseTask([]byte(tooMany)); err == nil {
		t.Fatal("accepted too many tests")
	}
}

// TestConnOverWebSocket runs a real loopback WebSocket: auth header arrives,
// no Origin check, messages round-trip, and an oversized frame is refused.
func TestConnOverWebSocket(t *testing.T) {
	got := make(chan Envelope, 1)
	errs := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := Accept(w, r)
		if err != nil {
			errs <- err
			return
		}
		go func() {
			defer c.Close()
			e, err := c.Receive()
			if err != nil {
				errs <- err
				return
			}
			got <- e
			if err := c.Send(Envelope{Type: TypeWelcome, Welcome: &Welcome{Lane: "w#1", Generation: strings.Repeat("ab", 16)}}); err != nil {
				errs <- err
				return
			}
			_, err = c.Receive()
			errs <- err
		}()
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := Dial(ctx, url, "wrong"); err == nil {
		t.Fatal("dial with a bad token succeeded")
	} else if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error leaks the token: %v", err)
	}
	c, err := Dial(ctx, url, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := Envelope{Type: TypeHello, Hello: &Hello{Protocol: Protocol, WorkerID: "w", Slot: 1, Plugins: []string{"reference"}, Repositories: []string{}}}
	if err := c.Send(hello); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Hello == nil || e.Hello.Slot != 1 {
			t.Fatalf("server got %+v", e)
		}
	case err := <-errs:
		t.Fatal(err)
	}
	w, err := c.Receive()
	if err != nil || w.Welcome == nil || w.Welcome.Lane != "w#1" {
		t.Fatalf("welcome: %+v %v", w, err)
	}
	if err := c.Send(Envelope{Type: TypeAck}); err == nil {
		t.Fatal("sent an invalid envelope")
	}
	// An oversized frame, written raw, is refused by the bounded codec.
	big, _ := json.Marshal(strings.Repeat("x", MaxMessageBytes))
	// The server stops reading at the header, so this write may break.
	_ = websocket.Message.Send(c.ws, string(big))
	if err := <-errs; !errors.Is(err, ErrTooLarge) {
		t.Fatalf("server got %v, want ErrTooLarge", err)
	}
}

func TestAcceptRejectsPlainRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := Accept(w, r); !errors.Is(err, ErrHandshake) {
			t.Errorf("Accept of a plain request: %v", err)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestDialRejectsBadURL(t *testing.T) {
	for _, u := range []string{"http://x", "ws://", "ws://u:p@h", "ws://h/path", "ws://h?q=1", "::"} {
		if _, err := Dial(context.Background(), u, "t"); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, b := range testseed.Read(f, "testdata/seed/*.json") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			if e.Type != "" || e.Hello != nil || e.Lease != nil || e.Result != nil {
				t.Fatal("error with a partial result")
			}
			return
		}
		enc, err := Encode(e)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("encoding does not decode: %v", err)
		}
		enc2, err := Encode(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatal("canonical encoding not stable")
		}
	})
}

func FuzzParseTask(f *testing.F) {
	files, err := filepath.Glob("testdata/task/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no task seeds: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseTask(data)
		if err != nil {
			if p.Kind != "" || p.Canonical != nil || !reflect.DeepEqual(p.Coding, CodingTask{}) {
				t.Fatal("error with a partial result")
			}
			return
		}
		p2, err := ParseTask(p.Canonical)
		if err != nil || p2.Kind != p.Kind || !bytes.Equal(p.Canonical, p2.Canonical) || !reflect.DeepEqual(p.Coding, p2.Coding) {
			t.Fatal("canonical task does not round-trip")
		}
	})
}

func TestFailureTable(t *testing.T) {
	retryable := []string{"execution_failed", "plugin_protocol_violation", "plugin_failed", "plugin_timeout",
		"plugin_output_limit", "plugin_spawn_failed", "worker_shutdown",
		"preparation_failed", "workspace_validation_failed", "commit_failed"}
	terminal := []string{"invalid_task", "scoped_test_failed", "plugin_identity_mismatch", "policy_exceeds_ceiling",
		"environment_not_allowed", "unknown_plugin", "invalid_policy", "unsupported_kind",
		"repository_unavailable", "default_branch_mismatch", "invalid_base", "workspace_violation",
		"empty_change", "commit_identity_mismatch", "invalid_activity", "repository_out_of_service",
		"plugin_incompatible", "candidate_too_large", "candidate_refused", "secret_in_candidate", "budget_exceeded"}
	want := map[string]Disposition{}
	for _, c := range retryable {
		want[c] = DispositionRetryable
	}
	for _, c := range terminal {
		want[c] = DispositionTerminal
	}
	codes := FailureCodes()
	if len(codes) != len(want) {
		t.Fatalf("table has %d codes, want %d", len(codes), len(want))
	}
	for _, c := range codes {
		d, ok := DispositionOf(c)
		if !ok || d != want[c] {
			t.Fatalf("%s: disposition %q %v, want %q", c, d, ok, want[c])
		}
		if err := CheckFailure(c, d); err != nil {
			t.Fatalf("%s: own pair refused: %v", c, err)
		}
		other := DispositionTerminal
		if d == DispositionTerminal {
			other = DispositionRetryable
		}
		if CheckFailure(c, other) == nil {
			t.Fatalf("%s: mismatched disposition accepted", c)
		}
		// Every table row passes the decoder, so the receiver decides.
		msg := `{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","disposition":"` +
			string(d) + `","failure_code":"` + c + `"}}`
		if _, err := Decode([]byte(msg)); err != nil {
			t.Fatalf("%s: decode: %v", c, err)
		}
	}
	for _, c := range []string{"max_attempts_exceeded", "lease_expired", "oops", ""} {
		if _, ok := DispositionOf(c); ok {
			t.Fatalf("%q is in the table", c)
		}
		if CheckFailure(c, DispositionRetryable) == nil || CheckFailure(c, DispositionTerminal) == nil {
			t.Fatalf("%q accepted", c)
		}
	}
	// A well-formed unknown code decodes (Gate answers reject invalid).
	if _, err := Decode([]byte(`{"type":"result","seq":1,"result":{"job_id":"j","attempt_id":"a","outcome":"failed","disposition":"retryable","failure_code":"future_code"}}`)); err != nil {
		t.Fatalf("well-formed unknown code: %v", err)
	}
}

package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
	"github.com/0k-lab/agent-forge/pkg/testseed"
)

// slowEnvelope is what decodeEnvelope must equal: strictjson.Decode, which
// fills the value with encoding/json.
func slowEnvelope(data []byte) (Envelope, error) {
	var e Envelope
	err := strictjson.Decode(data, &e)
	return e, err
}

func sameDecode(t *testing.T, data []byte, got, want any, gotErr, wantErr error) {
	t.Helper()
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s: error %v, encoding/json %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded %+v, encoding/json %+v", data, got, want)
	}
}

// TestFastDecodeCoversAttemptMessages: the messages of every attempt are
// filled without encoding/json, and exactly as it would fill them.
func TestFastDecodeCoversAttemptMessages(t *testing.T) {
	out, empty := "HELLO \"quoted\" \u2028 é \U0001F600", ""
	sha := "0123456789abcdef0123456789abcdef01234567"
	lease := testLease()
	leaseBytes, err := EncodeLease(&lease)
	if err != nil {
		t.Fatal(err)
	}
	live := testLease()
	live.ActivityVersion, live.Kind, live.DefaultBranch = "live_activity/v1", KindCoding, "main"
	live.Task = json.RawMessage(`{"repository_id":"r","base_sha":"` + sha + `","instruction":"x","tests":[["go","test"]]}`)
	liveBytes, err := EncodeLease(&live)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	ack, _ := EncodeAck(3, at)
	plainAck, _ := EncodeAck(4, time.Time{})
	msgs := [][]byte{leaseBytes, liveBytes, ack, plainAck}
	for _, e := range []Envelope{
		{Type: TypeResult, Seq: 9, Result: &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &out}},
		{Type: TypeResult, Seq: 9, Result: &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, Output: &empty}},
		{Type: TypeResult, Seq: 9, Result: &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, CandidateSHA: sha,
			AgentReport: &AgentReport{Summary: "s\n", Changes: []string{"a", "b\\c"}}}},
		{Type: TypeResult, Seq: 9, Result: &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeSucceeded, CandidateSHA: sha,
			AgentReport: &AgentReport{Summary: "s", Changes: []string{}}}},
		{Type: TypeResult, Seq: 1, Result: &Result{JobID: "j", AttemptID: "a", Outcome: OutcomeFailed, Disposition: DispositionRetryable, FailureCode: "plugin_failed"}},
		{Type: TypeHeartbeat, Seq: 18446744073709551615, Heartbeat: &Heartbeat{JobID: "j", AttemptID: "a"}},
		{Type: TypeWelcome, Welcome: &Welcome{Lane: "w#1", Generation: "0123456789abcdef0123456789abcdef"}},
		{Type: TypeReject, Seq: 2, Reject: &Reject{Code: RejectStale}},
		{Type: TypeCancel, Cancel: &Cancel{JobID: "j", AttemptID: "a", Reason: CancelExpired}},
		{Type: TypeActivity, Activity: &Activity{JobID: "j", AttemptID: "a", Version: "live_activity/v1", Stage: "analyzing"}},
	} {
		b, err := marshal(e) // not validated: decoding does not validate either
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, b)
	}
	// Escaped keys, spacing and member order are the document's business.
	msgs = append(msgs, []byte(" { \"seq\" : 5 , \"result\" : { \"outc\\u006fme\" : \"failed\" , \"failure_code\" : \"x\" ,"+
		"\"disposition\":\"terminal\", \"job_id\":\"j\",\"attempt_id\":\"a\" } , \"type\" : \"result\" } "))
	msgs = append(msgs, []byte(`{"type":"lease","lease":{"job_id":"j","attempt_id":"a","ordinal":1,"deadline_at":"2026-11-29T12:00:00+01:00",`+
		`"kind":"text","policy":{ "a" : [1, "]}" , {"b":"\""}] },"task":{"input":"x"},"activity":{"x":1}}}`))
	for _, m := range msgs {
		var e Envelope
		if !fillEnvelope(m, &e) {
			t.Fatalf("%s: not filled without encoding/json", m)
		}
		got, err := decodeEnvelope(m)
		want, wantErr := slowEnvelope(m)
		sameDecode(t, m, got, want, err, wantErr)
	}
	// Messages it leaves to encoding/json are still decoded.
	hello := []byte(`{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"w","slot":0,"plugins":[],"repositories":[]}}`)
	var e Envelope
	if fillEnvelope(hello, &e) {
		t.Fatal("hello filled by the fast path")
	}
	got, err := decodeEnvelope(hello)
	want, wantErr := slowEnvelope(hello)
	sameDecode(t, hello, got, want, err, wantErr)
	// A deadline time.Time refuses is reported as encoding/json reports it.
	bad := []byte(`{"type":"ack","seq":1,"ack":{"deadline_at":"2026-13-01T00:00:00Z"}}`)
	got, err = decodeEnvelope(bad)
	want, wantErr = slowEnvelope(bad)
	var se *strictjson.Error
	if !errors.As(err, &se) {
		t.Fatalf("bad deadline: %v", err)
	}
	sameDecode(t, bad, got, want, err, wantErr)
}

func TestFastTextTaskMatches(t *testing.T) {
	for _, in := range []string{`{"input":"hello"}`, `{"in\u0070ut":"a\nb\u00e9"}`, `{}`, ` { "input" : "" } `, `{"input":1}`, `{"input":"a","input":"b"}`, `[]`} {
		got, err := decodeTextTask([]byte(in))
		var want TextTask
		wantErr := strictjson.Decode([]byte(in), &want)
		if wantErr != nil {
			want = TextTask{}
		}
		sameDecode(t, []byte(in), got, want, err, wantErr)
	}
}

// FuzzFastDecodeMatches: whatever the input, decoding an Envelope or a
// text task gives exactly what strictjson.Decode (encoding/json) gives.
func FuzzFastDecodeMatches(f *testing.F) {
	testseed.Add(f, "testdata/seed/*.json")
	f.Add([]byte(`{"input":"x\u00e9"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeEnvelope(data)
		want, wantErr := slowEnvelope(data)
		if wantErr != nil {
			want = Envelope{}
		}
		sameDecode(t, data, got, want, err, wantErr)
		task, err := decodeTextTask(data)
		var wantTask TextTask
		if wantErr := strictjson.Decode(data, &wantTask); wantErr != nil {
			sameDecode(t, data, task, TextTask{}, err, wantErr)
		} else {
			sameDecode(t, data, task, wantTask, err, nil)
		}
	})
}

// FuzzFastDecodeStrings: any string content, as encoding/json writes it or
// with escapes it never writes, decodes as encoding/json decodes it.
func FuzzFastDecodeStrings(f *testing.F) {
	f.Add("HELLO", `\/\b\f\n\r\t\"\\`)
	f.Add("\x00\x1f\u2028\u2029\xff<>&", `\u00e9\ud83d\ude00\u0041`)
	f.Fuzz(func(t *testing.T, s, escaped string) {
		b, err := marshal(Envelope{Type: TypeResult, Seq: 1, Result: &Result{JobID: s, AttemptID: "a", Outcome: OutcomeSucceeded, Output: &s}})
		if err != nil {
			t.Fatalf("marshal: %v", err) // strings always encode
		}
		for _, m := range [][]byte{b, []byte(`{"type":"result","seq":1,"result":{"job_id":"` + escaped + `","output":"` + escaped + `"}}`)} {
			got, err := decodeEnvelope(m)
			want, wantErr := slowEnvelope(m)
			if wantErr != nil {
				want = Envelope{}
			}
			sameDecode(t, m, got, want, err, wantErr)
		}
	})
}

// parseTaskSame fails t unless ParseTask and parseTask (the general path,
// encoding/json) agree on data: the same task or the same error.
func parseTaskSame(t *testing.T, data []byte) {
	t.Helper()
	got, err := ParseTask(data)
	want, wantErr := parseTask(data)
	sameDecode(t, data, got, want, err, wantErr)
}

func TestParseTextTaskMatches(t *testing.T) {
	for _, in := range []string{`{"input":"hello"}`, `{"in\u0070ut":"a\nb\u00e9 \u2028 <&> \"q\""}`, `{}`, `{"input":""}`,
		` { "input" : "x" } `, `{"input":1}`, `{"input":"a","input":"b"}`, `{"input":"x","repository_id":"r"}`,
		`{"input":"\ud800"}`, "{\"input\":\"\xff\"}", `{"input":"x"} {}`, `[]`, `{"input":"` + strings.Repeat("é", MaxInputBytes/2+1) + `"}`,
		`{"repository_id":"r","base_sha":"` + strings.Repeat("a", 40) + `","instruction":"x"}`} {
		parseTaskSame(t, []byte(in))
	}
	p, ok := parseTextTask([]byte(` {"input":"x\u00e9"} `))
	if !ok || p.Kind != KindText || string(p.Canonical) != `{"input":"xé"}` {
		t.Fatalf("text task not parsed without encoding/json: %+v %v", p, ok)
	}
}

// FuzzParseTaskMatches: for any document, ParseTask (with its text fast
// path) answers exactly what the general path answers.
func FuzzParseTaskMatches(f *testing.F) {
	testseed.Add(f, "testdata/task/*.json")
	f.Fuzz(func(t *testing.T, data []byte) { parseTaskSame(t, data) })
}

package agent

import (
	"bytes"
	"strings"
	"testing"
)

// table is a small closed table exercising every effect.
func table() Rules {
	return Rules{
		"meta":    {Effect: Known},
		"retry":   {Effect: Diagnostic},
		"late":    {Effect: Diagnostic, AfterDone: true},
		"start":   {Effect: Begin},
		"done":    {Effect: Complete},
		"failed":  {Effect: Fail},
		"refused": {Effect: Refused},
	}
}

func verdictOf(kinds ...string) *Verdict {
	var v Verdict
	rules := table()
	for _, k := range kinds {
		v.Observe(rules, Event{Kind: k})
	}
	return &v
}

func TestVerdictFollowsTheClosedTable(t *testing.T) {
	tests := []struct {
		kinds  []string
		reason Reason
	}{
		{[]string{"meta", "start", "retry", "done"}, ""},
		{[]string{"retry", "start", "done", "late"}, ""},
		{[]string{"start", "done", "retry"}, ReasonUnexpectedEvent},
		{[]string{"start", "done", "meta"}, ReasonUnexpectedEvent},
		{[]string{"start", "start", "done"}, ReasonUnexpectedEvent},
		{[]string{"done"}, ReasonUnexpectedEvent},
		{[]string{"start", "done", "done"}, ReasonUnexpectedEvent},
		{[]string{"start", "mystery", "done"}, ReasonUnexpectedEvent},
		{[]string{"start", "failed"}, ReasonProviderFailed},
		{[]string{"start"}, ReasonNoCompletion},
		{nil, ReasonNoCompletion},
		{[]string{"start", "refused", "done"}, ReasonAuthRefused},
	}
	for _, tc := range tests {
		if got := verdictOf(tc.kinds...).Reason(); got != tc.reason {
			t.Errorf("%v: %q, want %q", tc.kinds, got, tc.reason)
		}
	}
}

func TestObserveStopsOnceDecided(t *testing.T) {
	var v Verdict
	rules := table()
	if first, stop := v.Observe(rules, Event{Kind: "start"}); !first || stop {
		t.Fatal("first Begin not reported")
	}
	if _, stop := v.Observe(rules, Event{Kind: "refused"}); !stop {
		t.Fatal("a refusal must stop the agent")
	}
	if _, stop := v.Observe(rules, Event{Kind: "done"}); !stop || v.Reason() != ReasonAuthRefused {
		t.Fatal("events after a refusal were believed")
	}
}

func TestFinalAnswerComesWithTheCompletion(t *testing.T) {
	var v Verdict
	rules := table()
	v.Observe(rules, Event{Kind: "start"})
	v.Observe(rules, Event{Kind: "done", Final: []byte(`{"commit_subject":"x"}`), Diagnostics: 2})
	if string(v.Final) != `{"commit_subject":"x"}` || v.Diagnostics != 2 {
		t.Fatalf("verdict %+v", v)
	}
}

func TestTailIsBoundedAndRedacted(t *testing.T) {
	const key = "sk-secret-value"
	tail := NewTail(64, key, "")
	tail.Record([]byte(`{"type":"error","message":"bad key sk-secret-value"}`))
	if got := string(tail.Bytes()); got != `{"type":"error","message":"bad key [redacted]"}`+"\n" {
		t.Fatalf("tail %q", got)
	}
	for i := 0; i < 10; i++ {
		tail.Record([]byte(strings.Repeat("x", 20) + key))
	}
	b := tail.Bytes()
	if len(b) > 64 || bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte("sk-")) {
		t.Fatalf("tail %q", b)
	}
	if q := Quoted([]byte("a\x1b\n\xff")); strings.ContainsAny(q, "\x1b\n") {
		t.Fatalf("quoted %q", q)
	}
}

func TestReadLinesRecordsRawBeforeParse(t *testing.T) {
	in := "one\ntwo\n" + strings.Repeat("z", 40) + "\nlost\n"
	tail := NewTail(1024)
	var seen []string
	malformed := readLines(strings.NewReader(in), 16, tail, func(line []byte) bool {
		if !bytes.Contains(tail.Bytes(), append(append([]byte{}, line...), '\n')) {
			t.Fatalf("line %q handed over before it was recorded", line)
		}
		seen = append(seen, string(line))
		return true
	})
	if !malformed || strings.Join(seen, ",") != "one,two" {
		t.Fatalf("malformed %v, seen %q", malformed, seen)
	}
	if bytes.Contains(tail.Bytes(), []byte("lost")) {
		t.Fatal("lines after an overlong one were recorded")
	}
	if readLines(strings.NewReader("a\nb"), 16, NewTail(0), func([]byte) bool { return true }) != true {
		t.Fatal("a final line without LF must be malformed")
	}
	n := 0
	if readLines(strings.NewReader("a\nb\nc\n"), 16, NewTail(0), func([]byte) bool { n++; return n < 2 }) || n != 2 {
		t.Fatalf("stop not honoured: %d lines", n)
	}
}

func TestEventObject(t *testing.T) {
	for line, want := range map[string]bool{
		`{"type":"init","n":1,"ok":true}`: true,
		`{}`:                              true,
		`{"type":"a","type":"b"}`:         false,
		`{"a":{"x":1,"x":2}}`:             true, // only the top level is read by key
		`[{"type":"a"}]`:                  false,
		`"type"`:                          false,
		`{"type":"a"} {}`:                 false,
		"{\"type\":\"\xff\"}":             false,
		`{"type":`:                        false,
	} {
		if got := EventObject([]byte(line)); got != want {
			t.Errorf("%q: %v", line, got)
		}
	}
}

package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

var (
	both        = Want{Subject: true, Report: true}
	subjectOnly = Want{Subject: true}
	reportOnly  = Want{Report: true}
)

func TestParseFinal(t *testing.T) {
	long := strings.Repeat("a", plugin.CommitSubjectBytes+1)
	thirteen := `["` + strings.Repeat(`c","`, 12) + `c"]`
	tests := []struct {
		name        string
		data        string
		want        Want
		subject     string
		summary     string
		changes     []string
		description string
	}{
		{name: "full", want: both, data: `{"commit_subject":"feat: add x","summary":"Added x.","changes":["x: new"]}`,
			subject: "feat: add x", summary: "Added x.", changes: []string{"x: new"}},
		{name: "whitespace around the object", want: both, data: "\n {\"changes\":[\"a\"],\"summary\":\"s\",\"commit_subject\":\"c\"} \n",
			subject: "c", summary: "s", changes: []string{"a"}},
		{name: "subject only", want: subjectOnly, data: `{"commit_subject":"fix: y"}`, subject: "fix: y"},
		{name: "report only", want: reportOnly, data: `{"summary":"S","changes":["a","b"]}`, summary: "S", changes: []string{"a", "b"}},
		{name: "nothing wanted", want: Want{}, data: `{"commit_subject":"fix: y"}`},
		{name: "not JSON", want: both, data: `Done! {not json`},
		{name: "empty", want: both, data: ``},
		{name: "JSON string", want: both, data: `"feat: add x"`},
		{name: "extra field", want: both, data: `{"commit_subject":"c","summary":"s","changes":["a"],"confidence":"high"}`},
		{name: "unwanted subject", want: reportOnly, data: `{"commit_subject":"c","summary":"s","changes":["a"]}`},
		{name: "unwanted report", want: subjectOnly, data: `{"commit_subject":"c","summary":"s","changes":["a"]}`},
		{name: "missing subject", want: both, data: `{"summary":"s","changes":["a"]}`},
		{name: "partial report", want: both, data: `{"commit_subject":"c","summary":"s"}`},
		{name: "null subject", want: both, data: `{"commit_subject":null,"summary":"s","changes":["a"]}`},
		{name: "duplicate key", want: subjectOnly, data: `{"commit_subject":"a","commit_subject":"b"}`},
		{name: "case variant key", want: subjectOnly, data: `{"Commit_Subject":"a"}`},
		{name: "number subject", want: subjectOnly, data: `{"commit_subject":7}`},
		{name: "trailing data", want: subjectOnly, data: `{"commit_subject":"a"}{}`},
		{name: "invalid UTF-8", want: subjectOnly, data: "{\"commit_subject\":\"a\xff\"}"},
		{name: "lone surrogate", want: subjectOnly, data: `{"commit_subject":"a\ud800"}`},
		{name: "two-line subject keeps the report", want: both, data: `{"commit_subject":"feat: a\nmore","summary":"s","changes":["a"]}`,
			summary: "s", changes: []string{"a"}},
		{name: "control character in subject", want: subjectOnly, data: `{"commit_subject":"feat: \u0007bell"}`},
		{name: "format character in subject", want: subjectOnly, data: `{"commit_subject":"feat: \u200bzero"}`},
		{name: "line separator in subject", want: subjectOnly, data: `{"commit_subject":"feat: a\u2028b"}`},
		{name: "subject too long", want: subjectOnly, data: `{"commit_subject":"` + long + `"}`},
		{name: "subject at the limit", want: subjectOnly, data: `{"commit_subject":"` + long[1:] + `"}`, subject: long[1:]},
		{name: "leading space", want: subjectOnly, data: `{"commit_subject":" feat: a"}`},
		{name: "trailing newline", want: subjectOnly, data: `{"commit_subject":"feat: a\n"}`},
		{name: "empty subject", want: subjectOnly, data: `{"commit_subject":""}`},
		{name: "bad report keeps the subject", want: both, data: `{"commit_subject":"c","summary":"s","changes":[]}`, subject: "c"},
		{name: "thirteen changes", want: reportOnly, data: `{"summary":"s","changes":` + thirteen + `}`},
		{name: "empty change", want: reportOnly, data: `{"summary":"s","changes":["a",""]}`},
		{name: "empty summary", want: reportOnly, data: `{"summary":"","changes":["a"]}`},
		{name: "untrimmed change", want: reportOnly, data: `{"summary":"s","changes":["a "]}`},
		{name: "oversized", want: subjectOnly, data: `{"commit_subject":"a"}` + strings.Repeat(" ", FinalMessageBytes)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := ParseFinal([]byte(tc.data), tc.want)
			if d.CommitSubject != tc.subject || d.Summary != tc.summary || !slices.Equal(d.Changes, tc.changes) {
				t.Fatalf("got %+v, want subject %q summary %q changes %q", d, tc.subject, tc.summary, tc.changes)
			}
		})
	}
}

// FuzzParseFinal: never panics; whatever survives is wanted and valid by
// the protocol's rules; a surviving complete description round-trips.
func FuzzParseFinal(f *testing.F) {
	f.Add([]byte(`{"commit_subject":"feat: add x","summary":"Added x.","changes":["x: new"]}`), true, true)
	f.Add([]byte(`{"commit_subject":"fix: a\nb"}`), true, false)
	f.Add([]byte(`{"summary":"s","changes":["a","b"]}`), false, true)
	f.Fuzz(func(t *testing.T, data []byte, subject, report bool) {
		want := Want{Subject: subject, Report: report}
		d := ParseFinal(data, want)
		if d.CommitSubject != "" && (!subject || plugin.CheckCommitSubject(d.CommitSubject) != nil) {
			t.Fatalf("kept an unwanted or invalid subject")
		}
		if (d.Summary != "") != (d.Changes != nil) {
			t.Fatalf("partial report")
		}
		if d.HasReport() && (!report || plugin.CheckReport(d.Summary, d.Changes) != nil) {
			t.Fatalf("kept an unwanted or invalid report")
		}
		if !want.Structured() || (subject && d.CommitSubject == "") || (report && !d.HasReport()) {
			return
		}
		m := map[string]any{}
		if subject {
			m["commit_subject"] = d.CommitSubject
		}
		if report {
			m["summary"], m["changes"] = d.Summary, d.Changes
		}
		enc, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again := ParseFinal(enc, want)
		if again.CommitSubject != d.CommitSubject || again.Summary != d.Summary || !slices.Equal(again.Changes, d.Changes) {
			t.Fatalf("description does not round-trip")
		}
	})
}

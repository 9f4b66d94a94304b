package agent

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

var update = flag.Bool("update", false, "rewrite the golden schema files")

func TestPromptHoldsInstructionAndConstraints(t *testing.T) {
	instr := "Fix the failing focused test.\nSecond line of the task."
	tests := []struct {
		want    Want
		has     []string
		hasNone []string
	}{
		{Want{}, []string{"It is not used."}, []string{`"commit_subject"`, `"summary"`}},
		{Want{Subject: true}, []string{`"commit_subject"`, "actual changes"}, []string{`"summary"`}},
		{Want{Report: true}, []string{`"summary"`, `"changes"`, "1 to 12"}, []string{`"commit_subject"`}},
		{Want{Subject: true, Report: true}, []string{`"commit_subject"`, `"summary"`, `"changes"`}, nil},
	}
	for _, tc := range tests {
		p := Prompt(instr, tc.want)
		if !strings.Contains(p, taskBegin+"\n"+instr+"\n"+taskEnd+"\n") {
			t.Errorf("%+v: the instruction is not between the task markers", tc.want)
		}
		for _, s := range append([]string{"Do not commit.", "AGENTS.md", "outside the workspace",
			"cannot change the task", "advisory"}, tc.has...) {
			if !strings.Contains(p, s) {
				t.Errorf("%+v: prompt lacks %q", tc.want, s)
			}
		}
		for _, s := range tc.hasNone {
			if strings.Contains(p, s) {
				t.Errorf("%+v: prompt asks for unnegotiated %s", tc.want, s)
			}
		}
	}
}

func TestPromptKeepsTrailingNewlineOnce(t *testing.T) {
	p := Prompt("task\n", Want{})
	if !strings.Contains(p, taskBegin+"\ntask\n"+taskEnd) {
		t.Fatal("an instruction ending in LF must not get a second one")
	}
}

type schemaView struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	Additional bool                       `json:"additionalProperties"`
}

func TestSchemaMatchesNegotiation(t *testing.T) {
	tests := []struct {
		name   string
		want   Want
		fields []string
	}{
		{"subject", Want{Subject: true}, []string{"commit_subject"}},
		{"report", Want{Report: true}, []string{"summary", "changes"}},
		{"both", Want{Subject: true, Report: true}, []string{"commit_subject", "summary", "changes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Schema(tc.want)
			golden := filepath.Join("testdata", "schema-"+tc.name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("schema differs from %s:\n%s", golden, got)
			}
			var v schemaView
			if err := strictjson.Decode(got, &v); err != nil {
				t.Fatalf("schema is not strict JSON: %v", err)
			}
			if v.Type != "object" || v.Additional || !slices.Equal(v.Required, tc.fields) || len(v.Properties) != len(tc.fields) {
				t.Fatalf("schema shape %+v, want exactly %v required", v, tc.fields)
			}
			for _, f := range tc.fields {
				if _, ok := v.Properties[f]; !ok {
					t.Fatalf("schema lacks property %s", f)
				}
			}
		})
	}
}

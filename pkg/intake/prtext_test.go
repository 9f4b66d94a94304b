package intake

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/0k-lab/agent-forge/pkg/store"
)

func prFacts() PRFacts {
	zero, one := 0, 1
	return PRFacts{JobID: "0123abcd", Trigger: &store.Trigger{RepositoryID: "app", Kind: store.TriggerLabel, EventID: 5, Number: 7, Actor: "maintainer"},
		Instruction: Instruction(Issue{Repository: "octo/app", Number: 7, Title: "Fix the parser @dependabot", Body: "b",
			Trigger: Trigger{Kind: store.TriggerLabel, Actor: "maintainer"}}),
		Summary: "Fixed it. @renovate[bot] rebase\n```\nbreak out", Changes: []string{"parse.go: empty input", "@someone"},
		Checks: []CheckOutcome{{Argv: []string{"go", "test", "./..."}, Reason: "passed", ExitCode: &zero, DurationMS: 1500},
			{Argv: []string{"sh", "-c", "exit 1 | x"}, Reason: "failed", ExitCode: &one, DurationMS: 20}, {Argv: []string{"lint"}}},
		Attempts: 2, Agent: "codex", UsageLine: "Model usage: not metered.", Candidate: "0123456789abcdef0123456789abcdef01234567"}
}

// outsideCode is body without its code spans and fenced blocks: what
// GitHub renders as Markdown, where an "@" would mention.
func outsideCode(t *testing.T, body string) string {
	t.Helper()
	var out strings.Builder
	lines := strings.Split(body, "\n")
	for i := 0; i < len(lines); i++ {
		if fence := strings.TrimRight(lines[i], "text"); strings.HasPrefix(lines[i], "```") {
			for i++; i < len(lines) && lines[i] != fence; i++ {
			}
			continue
		}
		line := lines[i]
		for {
			start := strings.Index(line, "`")
			if start < 0 {
				break
			}
			n := len(line[start:]) - len(strings.TrimLeft(line[start:], "`"))
			tick := line[start : start+n]
			end := strings.Index(line[start+n:], tick)
			if end < 0 {
				t.Fatalf("unclosed code span in %q", line)
			}
			line = line[:start] + line[start+n+end+n:]
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}

func TestPullRequestText(t *testing.T) {
	title, body := PullRequestText(prFacts())
	if title != "Fix the parser ＠dependabot (#7)" {
		t.Fatalf("title %q", title)
	}
	if !strings.HasPrefix(body, "Fixes #7\n\nAgent Forge job `0123abcd`, labelled by maintainer.") {
		t.Fatalf("body %q", body)
	}
	for _, want := range []string{"**Request:** ` Fix the parser @dependabot `", "| 1 | ` go test ./... ` | passed, exit 0, 1.5 s |",
		"| 2 | ` sh -c exit 1 \\| x ` | failed, exit 1, 0.0 s |", "| 3 | ` lint ` | no record |", "Attempts: 2. Agent: ` codex `",
		"Model usage: not metered.", "Fixed it. @renovate[bot] rebase", "- parse.go: empty input"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if rendered := outsideCode(t, body); strings.Contains(rendered, "@") {
		t.Fatalf("an @ outside code:\n%s", rendered)
	}
	// A submitted job: no Fixes, its instruction's first line.
	f := prFacts()
	f.Trigger, f.Instruction = nil, "\n  Add a --verbose flag\nwith details"
	title, body = PullRequestText(f)
	if title != "Add a --verbose flag" || strings.Contains(body, "Fixes") || !strings.HasPrefix(body, "Agent Forge job `0123abcd`.") {
		t.Fatalf("%q %q", title, body)
	}
}

func FuzzPullRequestText(f *testing.F) {
	f.Add("Fix @x", "summary ``` @y", "change")
	f.Add(strings.Repeat("`", 300), strings.Repeat("é", 40000), "\x00@")
	f.Fuzz(func(t *testing.T, instruction, summary, change string) {
		facts := prFacts()
		facts.Instruction, facts.Summary, facts.Changes = instruction, summary, []string{change, change}
		title, body := PullRequestText(facts)
		if len(title) > MaxPRTitleBytes+32 || len(body) > MaxPRBodyBytes || !utf8.ValidString(title) || !utf8.ValidString(body) {
			t.Fatalf("title %d, body %d bytes", len(title), len(body))
		}
		if strings.Contains(title, "@") || strings.Contains(outsideCode(t, body), "@") || !strings.HasPrefix(body, "Fixes #7\n") {
			t.Fatalf("title %q body %q", title, body)
		}
	})
}

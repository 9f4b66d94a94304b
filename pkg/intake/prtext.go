package intake

import (
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// Bounds of a pull request's text (GitHub allows 256 characters of title
// and 65,536 of body).
const (
	MaxPRTitleBytes  = 200
	MaxPRBodyBytes   = 60000
	maxReportBytes   = 16384
	maxChangeEntries = 100
	maxSubjectBytes  = 300
)

// CheckOutcome is one scoped check of the delivered attempt: its command
// (the Gate's own configuration or the owner's task, never the agent's)
// and what the evidence says of it.
type CheckOutcome struct {
	Argv       []string
	Reason     string // passed, failed, signalled, timed_out, spawn_failed; "" when no record
	ExitCode   *int
	DurationMS int64
}

// PRFacts is what a delivered job's pull request says.
type PRFacts struct {
	JobID       string
	Trigger     *store.Trigger // nil: a submitted job
	Instruction string
	Summary     string   // the agent's report: a claim, never evidence
	Changes     []string // idem
	Checks      []CheckOutcome
	Attempts    int // attempts the job took
	Agent       string
	UsageLine   string
	Candidate   string
}

// PullRequestText is the title and body of the pull request delivering
// f's job. An intake job's says "Fixes #N", so that the merge closes the
// issue. Text that others wrote (the title, the agent's report)
// is never rendered as Markdown: the title's "@" is a full-width one (no
// mention), the report sits in a code block; logins appear without "@".
func PullRequestText(f PRFacts) (title, body string) {
	subject := Subject(f.Instruction)
	title = cutRunes(noMention(subject), MaxPRTitleBytes)
	if title == "" {
		title = "Agent Forge job " + f.JobID
	}
	var b strings.Builder
	if tr := f.Trigger; tr != nil {
		title += " (#" + strconv.FormatInt(tr.Number, 10) + ")"
		b.WriteString("Fixes #" + strconv.FormatInt(tr.Number, 10) + "\n\n")
		how := "labelled by"
		if tr.Kind != store.TriggerLabel {
			how = "requested in a comment by"
		}
		b.WriteString("Agent Forge job `" + f.JobID + "`, " + how + " " + login(tr.Actor) + ".\n\n")
	} else {
		b.WriteString("Agent Forge job `" + f.JobID + "`.\n\n")
	}
	b.WriteString("**Request:** " + codeSpan(subject) + "\n\n")
	b.WriteString("### The agent's report\n\nWhat the agent says it did (its claim; the checks below are the evidence):\n\n")
	b.WriteString(fenced(report(f.Summary, f.Changes)) + "\n")
	b.WriteString("### Scoped checks\n\n")
	if len(f.Checks) == 0 {
		b.WriteString("None configured.\n\n")
	} else {
		b.WriteString("| # | Command | Outcome |\n|---|---|---|\n")
		for i, c := range f.Checks {
			b.WriteString("| " + strconv.Itoa(i+1) + " | " + codeSpan(strings.Join(c.Argv, " ")) + " | " + outcome(c) + " |\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("Attempts: " + strconv.Itoa(f.Attempts) + ". Agent: " + codeSpan(f.Agent) +
		" (the model is the one the Worker's agent profile names; the Gate is not told). " + f.UsageLine + "\n\n")
	b.WriteString("Candidate " + f.Candidate + ". It is merged once GitHub Actions pass for this exact commit.\n")
	body = b.String()
	if len(body) > MaxPRBodyBytes {
		body = cutRunes(body, MaxPRBodyBytes-64) + "\n\n[Agent Forge cut this text here: it was too long]\n"
	}
	return title, body
}

// Subject is what an instruction asks for, in one line: an intake
// instruction's quoted title, else the first non-blank line.
func Subject(instruction string) string {
	if _, rest, ok := strings.Cut(instruction, "\n<<<ISSUE TEXT "); ok {
		if _, rest, ok = strings.Cut(rest, "\n"); ok {
			if line, _, _ := strings.Cut(rest, "\n"); strings.HasPrefix(line, "Title: ") {
				return cutRunes(strings.TrimPrefix(line, "Title: "), maxSubjectBytes)
			}
		}
	}
	for _, line := range strings.Split(instruction, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			text, _ := clean(line, MaxRawPartBytes)
			return cutRunes(oneLine(text), maxSubjectBytes)
		}
	}
	return ""
}

func outcome(c CheckOutcome) string {
	if c.Reason == "" {
		return "no record"
	}
	s := strings.ReplaceAll(c.Reason, "_", " ")
	if c.ExitCode != nil {
		s += ", exit " + strconv.Itoa(*c.ExitCode)
	}
	return s + ", " + strconv.FormatFloat(float64(c.DurationMS)/1000, 'f', 1, 64) + " s"
}

// report is the agent's summary and changes as plain text, cleaned and
// bounded.
func report(summary string, changes []string) string {
	text, _ := clean(summary, MaxRawPartBytes)
	var b strings.Builder
	if strings.TrimSpace(text) == "" {
		text = "(no summary)"
	}
	b.WriteString(text)
	if len(changes) > 0 {
		b.WriteString("\n\nChanges:")
		for i, c := range changes {
			if i == maxChangeEntries {
				b.WriteString("\n- …")
				break
			}
			line, _ := clean(c, MaxRawPartBytes)
			b.WriteString("\n- " + oneLine(line))
		}
	}
	return cutRunes(b.String(), maxReportBytes)
}

// fenced puts text in a fenced code block whose fence no line of it can
// close.
func fenced(text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + "text\n" + text + "\n" + fence + "\n"
}

// codeSpan puts one line in a code span that it cannot close.
func codeSpan(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ", "|", "\\|").Replace(s)
	tick := "`"
	for strings.Contains(s, tick) {
		tick += "`"
	}
	return tick + " " + s + " " + tick
}

// noMention replaces "@" with the full-width "＠" GitHub never reads as a
// mention.
func noMention(s string) string { return strings.ReplaceAll(s, "@", "＠") }

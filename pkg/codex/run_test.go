package codex

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

func TestMain(m *testing.M) {
	agenttest.ServeReaper()
	os.Exit(m.Run())
}

const conformanceInstruction = "Create a file named CONFORMANCE.md containing one line: plugin conformance check."

// fixture is one run against the fake.
type fixture struct {
	t     *testing.T
	cfg   Config
	req   agent.Request
	files string // where the fake records argv, prompt, env names, pids
	*agenttest.Stages
}

func newFixture(t *testing.T, want agent.Want, env ...string) *fixture {
	t.Helper()
	files := t.TempDir()
	reapers := agenttest.Reapers(t)
	base := []string{"PATH=/usr/bin:/bin",
		"FAKE_CODEX_ARGV_FILE=" + filepath.Join(files, "argv.json"),
		"FAKE_CODEX_PROMPT_FILE=" + filepath.Join(files, "prompt.txt"),
		"FAKE_CODEX_ENV_FILE=" + filepath.Join(files, "env.txt"),
		"FAKE_CODEX_PID_FILE=" + filepath.Join(files, "pids"),
	}
	base = append(base, agenttest.GatewayEnv("corp-anthropic=anthropic-messages,corp-openai=openai-responses")...)
	return &fixture{
		t:      t,
		cfg:    Config{Bin: agenttest.FakeCodex(t), Env: append(base, env...), Reaper: reapers, TempDir: t.TempDir()},
		req:    agent.Request{Workspace: agenttest.GitWorkspace(t), Instruction: conformanceInstruction, Timeout: time.Minute, Want: want},
		files:  files,
		Stages: agenttest.NewStages(t, map[plugin.Stage]string{plugin.StageStarted: TextStarted, plugin.StageWorking: TextWorking, plugin.StageFinalizing: TextFinalized}),
	}
}

func (f *fixture) run(ctx context.Context) (Outcome, error) {
	return Run(ctx, f.cfg, f.req, f.Progress)
}

func (f *fixture) file(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.files, name))
	if err != nil {
		f.t.Fatalf("the fake did not record %s", name)
	}
	return string(b)
}

func (f *fixture) workspaceFile(name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(f.req.Workspace, name))
	return string(b), err == nil
}

// requireNoRunDir checks the private run directory was removed.
func (f *fixture) requireNoRunDir() {
	f.t.Helper()
	agenttest.RequireEmpty(f.t, f.cfg.TempDir)
}

func TestRunSuccessWithDescription(t *testing.T) {
	f := newFixture(t, both)
	out, err := f.run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, ok := f.workspaceFile("CONFORMANCE.md"); !ok || got != "plugin conformance check\n" {
		t.Fatalf("workspace not edited by the scripted rule: %q", got)
	}
	if out.CommitSubject != "feat: add CONFORMANCE.md" || out.Summary != "Created CONFORMANCE.md with one line." ||
		!slices.Equal(out.Changes, []string{"CONFORMANCE.md: new file with one line"}) {
		t.Fatalf("description %+v", out.Description)
	}
	if out.SubjectDropped || out.ReportDropped || out.Diagnostics != 0 {
		t.Fatalf("diagnostics %+v", out)
	}
	if want := []plugin.Stage{plugin.StageStarted, plugin.StageWorking, plugin.StageFinalizing}; !slices.Equal(f.Got(), want) {
		t.Fatalf("progress %v, want %v", f.Got(), want)
	}

	var argv []string
	if err := json.Unmarshal([]byte(f.file("argv.json")), &argv); err != nil {
		t.Fatal(err)
	}
	i := slices.Index(argv, "--output-schema")
	if i < 0 || i+3 >= len(argv) {
		t.Fatalf("argv lacks the output flags: %q", argv)
	}
	schema, last := argv[i+1], argv[i+3]
	if filepath.Base(schema) != SchemaFile || filepath.Base(last) != LastMessageFile || filepath.Dir(schema) != filepath.Dir(last) ||
		!strings.HasPrefix(schema, f.cfg.TempDir+"/forge-codex-") {
		t.Fatalf("output files not in one private run directory: %q %q", schema, last)
	}
	if want := Args(f.req.Workspace, both, schema, last); !slices.Equal(argv, want) {
		t.Fatalf("argv\n got %q\nwant %q", argv, want)
	}
	if got := f.file("prompt.txt"); got != agent.Prompt(conformanceInstruction, both) {
		t.Fatalf("prompt on stdin differs from agent.Prompt():\n%s", got)
	}
	if names := f.file("env.txt"); !strings.Contains(names, "\nPATH\n") && !strings.HasPrefix(names, "PATH\n") {
		t.Fatalf("Codex did not get the configured environment: %q", names)
	}
	f.requireNoRunDir()
}

func TestRunWithoutDescriptionAsksForNone(t *testing.T) {
	f := newFixture(t, agent.Want{})
	out, err := f.run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.CommitSubject != "" || out.HasReport() || out.SubjectDropped || out.ReportDropped {
		t.Fatalf("outcome %+v without negotiation", out)
	}
	var argv []string
	if err := json.Unmarshal([]byte(f.file("argv.json")), &argv); err != nil {
		t.Fatal(err)
	}
	if want := Args(f.req.Workspace, agent.Want{}, "", ""); !slices.Equal(argv, want) {
		t.Fatalf("argv\n got %q\nwant %q", argv, want)
	}
	if _, ok := f.workspaceFile("CONFORMANCE.md"); !ok {
		t.Fatal("workspace not edited")
	}
}

func TestRunSubjectOnlyAndReportOnly(t *testing.T) {
	f := newFixture(t, subjectOnly)
	out, err := f.run(context.Background())
	if err != nil || out.CommitSubject != "feat: add CONFORMANCE.md" || out.HasReport() {
		t.Fatalf("subject only: %+v, %v", out, err)
	}
	f = newFixture(t, reportOnly)
	out, err = f.run(context.Background())
	if err != nil || out.CommitSubject != "" || !out.HasReport() {
		t.Fatalf("report only: %+v, %v", out, err)
	}
}

func TestRunOmitsInvalidDescriptions(t *testing.T) {
	tests := []struct {
		name          string
		env           []string
		subject, keep bool // subject kept, report kept
	}{
		{"invalid structured output", []string{"FAKE_CODEX_MODE=invalid-output"}, false, false},
		{"wrong shape", []string{"FAKE_CODEX_MODE=wrong-shape"}, false, false},
		{"no final message", []string{"FAKE_CODEX_MODE=no-output"}, false, false},
		{"two-line subject", []string{"FAKE_CODEX_SUBJECT=feat: one\nfeat: two"}, false, true},
		{"control character", []string{"FAKE_CODEX_SUBJECT=feat: \x1b[31mred"}, false, true},
		{"too long", []string{"FAKE_CODEX_SUBJECT=feat: " + strings.Repeat("x", 251)}, false, true},
		{"leading space", []string{"FAKE_CODEX_SUBJECT= feat: x"}, false, true},
		{"exact final message", []string{`FAKE_CODEX_LAST_MESSAGE={"commit_subject":"fix: z","summary":"S","changes":[]}`}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, both, tc.env...)
			out, err := f.run(context.Background())
			if err != nil {
				t.Fatalf("an invalid description failed the edit: %v", err)
			}
			if (out.CommitSubject != "") != tc.subject || out.HasReport() != tc.keep {
				t.Fatalf("outcome %+v, want subject kept=%v report kept=%v", out.Description, tc.subject, tc.keep)
			}
			if out.SubjectDropped == tc.subject || out.ReportDropped == tc.keep {
				t.Fatalf("dropped flags %+v", out)
			}
			if _, ok := f.workspaceFile("CONFORMANCE.md"); !ok {
				t.Fatal("workspace not edited")
			}
			f.requireNoRunDir()
		})
	}
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		mode   string
		env    []string
		limit  int64
		reason agent.Reason
	}{
		{mode: "crash", reason: agent.ReasonExit},
		{mode: "turn-failed", reason: agent.ReasonExit},
		{mode: "turn-failed-exit0", reason: agent.ReasonProviderFailed},
		{mode: "no-completion", reason: agent.ReasonNoCompletion},
		{mode: "unknown-event", reason: agent.ReasonUnexpectedEvent},
		{mode: "no-turn-start", reason: agent.ReasonUnexpectedEvent},
		{mode: "second-turn", reason: agent.ReasonUnexpectedEvent},
		{mode: "late-unknown", reason: agent.ReasonUnexpectedEvent},
		{mode: "late-error", reason: agent.ReasonUnexpectedEvent},
		{mode: "malformed-event", reason: agent.ReasonMalformedEvents},
		{mode: "long-line", reason: agent.ReasonMalformedEvents},
		{mode: "huge-output", limit: 1 << 20, env: []string{"FAKE_CODEX_HUGE_BYTES=16777216"}, reason: agent.ReasonOutputLimit},
		{mode: "huge-stderr", limit: 1 << 20, env: []string{"FAKE_CODEX_HUGE_BYTES=16777216"}, reason: agent.ReasonOutputLimit},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFixture(t, both, append(tc.env, "FAKE_CODEX_MODE="+tc.mode)...)
			f.cfg.OutputLimit = tc.limit
			_, err := f.run(context.Background())
			agenttest.RequireReason(t, err, tc.reason, plugin.CategoryExecutionFailed, "panicked")
			if slices.Contains(f.Got(), plugin.StageFinalizing) {
				t.Fatal("finalizing reported for a failed run")
			}
			f.requireNoRunDir()
		})
	}
}

// TestRunRefusedCredentialsAreAMisconfiguration: a 401 from the provider
// ends the run at once as incompatible (the terminal plugin_incompatible),
// not as a retryable failure.
func TestRunRefusedCredentialsAreAMisconfiguration(t *testing.T) {
	f := newFixture(t, both, "FAKE_CODEX_MODE=status-401")
	_, err := f.run(context.Background())
	agenttest.RequireReason(t, err, agent.ReasonAuthRefused, plugin.CategoryIncompatible, "panicked")
	f.requireNoRunDir()
}

func TestRunHugeOutputWithinBudgetSucceeds(t *testing.T) {
	f := newFixture(t, both, "FAKE_CODEX_MODE=huge-output", "FAKE_CODEX_HUGE_BYTES=4194304")
	out, err := f.run(context.Background())
	if err != nil || out.CommitSubject == "" {
		t.Fatalf("4 MiB of events within the default budget: %+v, %v", out, err)
	}
}

func TestRunPromptDirectiveSelectsMode(t *testing.T) {
	f := newFixture(t, both)
	f.req.Instruction = "Do something.\nfake-codex-mode: crash"
	_, err := f.run(context.Background())
	agenttest.RequireReason(t, err, agent.ReasonExit, plugin.CategoryExecutionFailed, "panicked")
}

func TestRunRetriedErrorsAreDiagnosticsNotFailures(t *testing.T) {
	f := newFixture(t, both, "FAKE_CODEX_MODE=retried-error")
	out, err := f.run(context.Background())
	if err != nil || out.Diagnostics != 2 || out.CommitSubject == "" {
		t.Fatalf("outcome %+v, %v; want success with an error event and an error item as diagnostics", out, err)
	}
	if got, ok := f.workspaceFile("CONFORMANCE.md"); !ok || got != "plugin conformance check\n" {
		t.Fatalf("edit %q, %v", got, ok)
	}
}

// TestRunFailureKeepsARedactedRawTail: a failed run carries the bounded end of the raw event
// stream, recorded before it was parsed, with the gateway credential replaced.
func TestRunFailureKeepsARedactedRawTail(t *testing.T) {
	key := agenttest.Credential
	f := newFixture(t, both, "FAKE_CODEX_MODE=late-error", "FAKE_CODEX_ECHO_ENV="+KeyEnv)
	_, err := f.run(context.Background())
	agenttest.RequireReason(t, err, agent.ReasonUnexpectedEvent, plugin.CategoryExecutionFailed, "panicked")
	var e *agent.Error
	if !errors.As(err, &e) {
		t.Fatal("not a run error")
	}
	tail := string(e.Tail)
	if !strings.Contains(tail, `"turn.completed"`) || !strings.Contains(tail, "canary-late-error [redacted]") {
		t.Fatalf("tail lacks the raw events: %q", tail)
	}
	if strings.Contains(tail, key) || strings.Contains(err.Error(), key) {
		t.Fatal("the credential reached the raw tail or the error")
	}
	if len(e.Tail) > agent.DefaultTailBytes {
		t.Fatalf("tail of %d bytes", len(e.Tail))
	}
}

func TestRunFallbackEditForOtherInstructions(t *testing.T) {
	f := newFixture(t, both)
	f.req.Instruction = "Refactor the parser."
	out, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := f.workspaceFile("FAKE-CODEX.md"); !ok || !strings.HasPrefix(got, "task ") {
		t.Fatalf("fallback edit missing: %q", got)
	}
	if out.CommitSubject != "chore: record the task in FAKE-CODEX.md" {
		t.Fatalf("subject %q", out.CommitSubject)
	}
}

func TestRunCancelKillsTheProcessGroup(t *testing.T) {
	for _, mode := range []string{"hang", "hang-ignore-term"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, both, "FAKE_CODEX_MODE="+mode)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-f.Working() // the fake wrote its pids and started its turn
				cancel()
			}()
			_, err := f.run(ctx)
			agenttest.RequireReason(t, err, agent.ReasonCancelled, plugin.CategoryCancelled, "panicked")
			agenttest.RequireGone(t, filepath.Join(f.files, "pids"))
			f.requireNoRunDir()
		})
	}
}

func TestRunTimeout(t *testing.T) {
	f := newFixture(t, both, "FAKE_CODEX_MODE=hang")
	f.req.Timeout = time.Second
	_, err := f.run(context.Background())
	agenttest.RequireReason(t, err, agent.ReasonTimeout, plugin.CategoryExecutionFailed, "panicked")
	f.requireNoRunDir()
}

func TestRunSetupFailures(t *testing.T) {
	t.Run("missing CODEX_BIN path", func(t *testing.T) {
		f := newFixture(t, both)
		f.cfg.Bin = filepath.Join(t.TempDir(), "codex")
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonUnavailable, plugin.CategoryIncompatible, "panicked")
	})
	t.Run("codex not on PATH", func(t *testing.T) {
		f := newFixture(t, both)
		f.cfg.Bin = ""
		f.cfg.Env = []string{"PATH=" + t.TempDir()}
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonUnavailable, plugin.CategoryIncompatible, "panicked")
	})
	t.Run("not executable", func(t *testing.T) {
		f := newFixture(t, both)
		p := filepath.Join(t.TempDir(), "codex")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f.cfg.Bin = p
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonUnavailable, plugin.CategoryIncompatible, "panicked")
	})
	t.Run("workspace missing", func(t *testing.T) {
		f := newFixture(t, both)
		f.req.Workspace = filepath.Join(t.TempDir(), "gone")
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonWorkspace, plugin.CategoryInvalidRequest, "panicked")
	})
	t.Run("workspace outside Git", func(t *testing.T) {
		f := newFixture(t, both)
		f.req.Workspace = t.TempDir()
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonExit, plugin.CategoryExecutionFailed, "panicked")
	})
	t.Run("already cancelled", func(t *testing.T) {
		f := newFixture(t, both)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := f.run(ctx)
		agenttest.RequireReason(t, err, agent.ReasonCancelled, plugin.CategoryCancelled, "panicked")
		if _, err := os.Stat(filepath.Join(f.files, "argv.json")); err == nil {
			t.Fatal("Codex started after cancellation")
		}
	})
}

func TestResolveFindsCodexOnPath(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "codex")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := agent.Resolve(Name, "", DefaultBin, []string{"PATH=relative/dir::" + dir})
	if err != nil || got != p {
		t.Fatalf("Resolve: %q, %v", got, err)
	}
	if _, err := agent.Resolve(Name, "", DefaultBin, []string{"PATH=" + filepath.Base(dir)}); err == nil {
		t.Fatal("a relative PATH entry was searched")
	}
}

func TestCodexTimeoutKeepsAMargin(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{10 * time.Second, 9 * time.Second},
		{15 * time.Minute, 15*time.Minute - 5*time.Second},
		{time.Millisecond, 900 * time.Microsecond},
	} {
		if got := agent.AgentTimeout(tc.in); got != tc.want {
			t.Errorf("agent.AgentTimeout(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

var (
	both        = agent.Want{Subject: true, Report: true}
	subjectOnly = agent.Want{Subject: true}
	reportOnly  = agent.Want{Report: true}
)

package claude

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

const (
	instruction = "Create a file named NOTES.md containing one line: edited by claude."
	// testKey is an ambient key in the plugin's environment that must
	// never reach Claude Code (the Worker never hands one over).
	testKey = "sk-ant-canary-0123456789abcdef"
)

// offer is the Worker's providers in the tests: one of each kind.
const offer = "anthropic=anthropic-messages,openai=openai-responses"

var both = agent.Want{Subject: true, Report: true}

type fixture struct {
	t     *testing.T
	cfg   Config
	req   agent.Request
	files string
	*agenttest.Stages
}

func newFixture(t *testing.T, want agent.Want, env ...string) *fixture {
	t.Helper()
	files := t.TempDir()
	reapers := agenttest.Reapers(t)
	base := append([]string{"PATH=/usr/bin:/bin", "ANTHROPIC_API_KEY=" + testKey,
		"FAKE_CLAUDE_ARGV_FILE=" + filepath.Join(files, "argv.json"),
		"FAKE_CLAUDE_PROMPT_FILE=" + filepath.Join(files, "prompt.txt"),
		"FAKE_CLAUDE_ENV_FILE=" + filepath.Join(files, "env.json"),
		"FAKE_CLAUDE_PID_FILE=" + filepath.Join(files, "pids"),
	}, agenttest.GatewayEnv(offer)...)
	return &fixture{
		t: t,
		cfg: Config{Bin: agenttest.FakeClaude(t), Env: append(base, env...), Reaper: reapers, TempDir: t.TempDir(),
			Profile: Profile{Model: "claude-opus-4-6", Effort: "high", Provider: "anthropic"}},
		req:    agent.Request{Workspace: agenttest.GitWorkspace(t), Instruction: instruction, Timeout: time.Minute, Want: want},
		files:  files,
		Stages: agenttest.NewStages(t, map[plugin.Stage]string{plugin.StageStarted: TextStarted, plugin.StageWorking: TextWorking, plugin.StageFinalizing: TextFinalized}),
	}
}

func (f *fixture) run(ctx context.Context) (agent.Outcome, error) {
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

func (f *fixture) requireNoRunDir() {
	f.t.Helper()
	agenttest.RequireEmpty(f.t, f.cfg.TempDir)
}

func TestRunSuccessWithDescription(t *testing.T) {
	f := newFixture(t, both, "ANTHROPIC_AUTH_TOKEN=ambient", "CLAUDE_CODE_USE_BEDROCK=1", "DISABLE_PROMPT_CACHING=1", "HOME=/root")
	out, err := f.run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(f.req.Workspace, "NOTES.md")); err != nil || string(b) != "edited by claude\n" {
		t.Fatalf("workspace not edited: %q %v", b, err)
	}
	if out.CommitSubject != "feat: add NOTES.md" || out.Summary != "Added NOTES.md." ||
		!slices.Equal(out.Changes, []string{"NOTES.md: new file with one line"}) || out.Diagnostics != 0 {
		t.Fatalf("outcome %+v", out)
	}
	if want := []plugin.Stage{plugin.StageStarted, plugin.StageWorking, plugin.StageFinalizing}; !slices.Equal(f.Got(), want) {
		t.Fatalf("progress %v, want %v", f.Got(), want)
	}
	var argv []string
	if err := json.Unmarshal([]byte(f.file("argv.json")), &argv); err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"object","properties":{"commit_subject":{"type":"string","description":"One-line commit subject describing the actual changes, at most 256 bytes."},"summary":{"type":"string","description":"One-line summary of the actual changes, at most 1024 bytes."},"changes":{"type":"array","items":{"type":"string"},"description":"1 to 12 one-line entries of at most 256 bytes, one per concrete change."}},"required":["commit_subject","summary","changes"],"additionalProperties":false}`
	want := []string{"-p", "--bare", "--output-format", "stream-json", "--verbose", "--no-session-persistence",
		"--tools", "Read,Edit", "--restricted", "--permission-mode", "acceptEdits", "--permission-prompts", "none",
		"--strict-mcp-config", "--disable-slash-commands", "--model", "claude-opus-4-6", "--effort", "high",
		"--json-schema", schema}
	if !slices.Equal(argv, want) {
		t.Fatalf("argv\n got %q\nwant %q", argv, want)
	}
	if got := f.file("prompt.txt"); got != agent.Prompt(instruction, both) {
		t.Fatalf("prompt on stdin differs from agent.Prompt:\n%s", got)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(f.file("env.json")), &env); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"HOME", "CLAUDE_CONFIG_DIR", "TMPDIR"} {
		if !strings.HasPrefix(env[k], f.cfg.TempDir+"/forge-claude-") {
			t.Fatalf("%s=%q is not inside the private run directory", k, env[k])
		}
	}
	// The fake refuses to run unless the key is a gateway credential.
	if env["ANTHROPIC_API_KEY"] != strconv.Itoa(len(agenttest.Credential)) || env["ANTHROPIC_BASE_URL"] != agenttest.GatewayURL+"/anthropic" {
		t.Fatalf("credential or gateway URL not passed: %q %q", env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"])
	}
	for _, k := range []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "DISABLE_PROMPT_CACHING",
		plugin.EnvGatewayURL, plugin.EnvGatewayToken, plugin.EnvGatewayProviders} {
		if _, ok := env[k]; ok {
			t.Fatalf("ambient %s reached Claude Code", k)
		}
	}
	for _, kv := range []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"} {
		k, v, _ := strings.Cut(kv, "=")
		if env[k] != v {
			t.Fatalf("%s not set", kv)
		}
	}
	f.requireNoRunDir()
}

func TestRunWithoutDescriptionAsksForNone(t *testing.T) {
	f := newFixture(t, agent.Want{})
	f.cfg.Profile = Profile{} // the only anthropic-messages provider
	out, err := f.run(context.Background())
	if err != nil || out.CommitSubject != "" || out.HasReport() {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	var argv []string
	json.Unmarshal([]byte(f.file("argv.json")), &argv)
	if slices.Contains(argv, "--json-schema") || slices.Contains(argv, "--model") || slices.Contains(argv, "--effort") {
		t.Fatalf("argv %q", argv)
	}
}

func TestRunDiagnosticsAreNotFailures(t *testing.T) {
	for mode, n := range map[string]int{"tool-error": 1, "retried": 1} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, both, "FAKE_CLAUDE_MODE="+mode)
			out, err := f.run(context.Background())
			if err != nil || out.Diagnostics != n || out.CommitSubject == "" {
				t.Fatalf("outcome %+v, %v; want success with %d diagnostics", out, err, n)
			}
		})
	}
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		mode   string
		reason agent.Reason
	}{
		{"result-error", agent.ReasonExit},
		{"is-error", agent.ReasonExit},
		{"no-result", agent.ReasonNoCompletion},
		{"exit-nonzero", agent.ReasonExit},
		{"unknown-event", agent.ReasonUnexpectedEvent},
		{"late-event", agent.ReasonUnexpectedEvent},
		{"malformed", agent.ReasonMalformedEvents},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFixture(t, both, "FAKE_CLAUDE_MODE="+tc.mode)
			_, err := f.run(context.Background())
			agenttest.RequireReason(t, err, tc.reason, plugin.CategoryExecutionFailed, testKey)
			f.requireNoRunDir()
		})
	}
}

func TestRunMissingStructuredOutputDropsTheDescription(t *testing.T) {
	f := newFixture(t, both, "FAKE_CLAUDE_MODE=no-structured")
	out, err := f.run(context.Background())
	if err != nil || out.CommitSubject != "" || !out.SubjectDropped || !out.ReportDropped {
		t.Fatalf("outcome %+v, %v", out, err)
	}
}

// TestRunRefusedCredentialsAreAMisconfiguration: Claude Code retries a 401
// for minutes; the adapter stops it at the first refusal and the run is
// incompatible (terminal), not a retryable failure.
func TestRunRefusedCredentialsAreAMisconfiguration(t *testing.T) {
	f := newFixture(t, both, "FAKE_CLAUDE_MODE=auth-refused", "FAKE_CLAUDE_ECHO_KEY=1")
	start := time.Now()
	_, err := f.run(context.Background())
	agenttest.RequireReason(t, err, agent.ReasonAuthRefused, plugin.CategoryIncompatible, testKey)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the refusal took %v to end the run", d)
	}
	var e *agent.Error
	if !errors.As(err, &e) || !strings.Contains(string(e.Tail), "authentication_failed") {
		t.Fatalf("no raw tail: %v", err)
	}
	f.requireNoRunDir()
}

func TestRawTailRedactsTheKey(t *testing.T) {
	f := newFixture(t, both, "FAKE_CLAUDE_MODE=late-event", "FAKE_CLAUDE_ECHO_KEY=1")
	_, err := f.run(context.Background())
	var e *agent.Error
	if !errors.As(err, &e) || !strings.Contains(string(e.Tail), "key=[redacted]") || strings.Contains(string(e.Tail), agenttest.Credential) {
		t.Fatalf("tail %q", e.Tail)
	}
}

func TestRunSetupFailuresAreMisconfigurations(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider string
		env      []string
		reason   agent.Reason
	}{
		{"no gateway", "", []string{plugin.EnvGatewayURL + "="}, agent.ReasonNoGateway},
		{"provider of another kind", "openai", nil, agent.ReasonGatewayProvider},
		{"no provider of the kind", "", []string{plugin.EnvGatewayProviders + "=openai=openai-responses"}, agent.ReasonGatewayChoice},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, both, c.env...)
			f.cfg.Profile.Provider = c.provider
			_, err := f.run(context.Background())
			agenttest.RequireReason(t, err, c.reason, plugin.CategoryIncompatible, testKey, agenttest.Credential)
			if _, err := os.Stat(filepath.Join(f.files, "argv.json")); err == nil {
				t.Fatal("Claude Code started without the gateway")
			}
		})
	}
	t.Run("executable missing", func(t *testing.T) {
		f := newFixture(t, both)
		f.cfg.Bin = ""
		f.cfg.Env = append(f.cfg.Env, "PATH="+t.TempDir())
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonUnavailable, plugin.CategoryIncompatible, testKey)
	})
	t.Run("workspace missing", func(t *testing.T) {
		f := newFixture(t, both)
		f.req.Workspace = filepath.Join(t.TempDir(), "gone")
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonWorkspace, plugin.CategoryInvalidRequest, testKey)
	})
}

func TestRunCancelAndTimeoutStopTheProcessTree(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		f := newFixture(t, both, "FAKE_CLAUDE_MODE=hang")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-f.Working()
			for i := 0; i < 200; i++ { // the pid file follows system/init
				if _, err := os.Stat(filepath.Join(f.files, "pids")); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
		_, err := f.run(ctx)
		agenttest.RequireReason(t, err, agent.ReasonCancelled, plugin.CategoryCancelled, testKey)
		agenttest.RequireGone(t, filepath.Join(f.files, "pids"))
		f.requireNoRunDir()
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFixture(t, both, "FAKE_CLAUDE_MODE=hang")
		f.req.Timeout = 2 * time.Second
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonTimeout, plugin.CategoryExecutionFailed, testKey)
		agenttest.RequireGone(t, filepath.Join(f.files, "pids"))
		f.requireNoRunDir()
	})
}

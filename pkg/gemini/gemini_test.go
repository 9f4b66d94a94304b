package gemini

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

func fakeGemini(t *testing.T) string {
	t.Helper()
	return agenttest.Program(t, "fake-gemini-cli/gemini")
}

// ambient are variables of the plugin's environment that must never reach
// Gemini CLI: each could redirect the run, widen it or start something.
var ambient = []string{"GEMINI_API_KEY=canary-key", "GOOGLE_API_KEY=canary-google", "GOOGLE_GENAI_USE_VERTEXAI=true",
	"GOOGLE_GEMINI_BASE_URL=https://canary.example.com", "GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_HOME=/canary",
	"GEMINI_TELEMETRY_ENABLED=true", "OTEL_EXPORTER_OTLP_ENDPOINT=https://canary.example.com", "HTTPS_PROXY=http://canary:1",
	"https_proxy=http://canary:1", "NODE_OPTIONS=--require=/canary.js", "SANDBOX=canary", "CLOUD_SHELL=true",
	"DEBUG=1", "CLOUDSDK_CONFIG=/canary", "HOME=/canary-home", "TMPDIR=/canary-tmp"}

type run struct {
	out   agent.Outcome
	err   error
	argv  []string
	env   map[string]string
	set   string
	tmp   string
	texts []plugin.Stage
}

func runFake(t *testing.T, mode string, want agent.Want, p Profile, env ...string) run {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"ARGV": "argv.json", "ENV": "env.json", "SETTINGS": "settings.json"}
	base := append(agenttest.GatewayEnv("g=gemini-generate-content,a=anthropic-messages"), "PATH=/usr/bin:/bin", "FAKE_GEMINI_MODE="+mode)
	for k, f := range files {
		base = append(base, "FAKE_GEMINI_"+k+"_FILE="+filepath.Join(dir, f))
	}
	r := run{tmp: t.TempDir()}
	stages := agenttest.NewStages(t, map[plugin.Stage]string{plugin.StageStarted: TextStarted, plugin.StageWorking: TextWorking,
		plugin.StageFinalizing: TextFinalized})
	r.out, r.err = Run(context.Background(), Config{Bin: fakeGemini(t), Env: append(append(ambient, base...), env...),
		Reaper: agenttest.Reapers(t), TempDir: r.tmp, Profile: p},
		agent.Request{Workspace: agenttest.GitWorkspace(t), Instruction: "Create a file named G.md containing one line: gemini.",
			Timeout: time.Minute, Want: want}, stages.Progress)
	r.texts = stages.Got()
	if b, err := os.ReadFile(filepath.Join(dir, "argv.json")); err == nil {
		json.Unmarshal(b, &r.argv)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "env.json")); err == nil {
		json.Unmarshal(b, &r.env)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "settings.json")); err == nil {
		r.set = string(b)
	}
	agenttest.RequireEmpty(t, r.tmp)
	return r
}

func TestRunCompletesWithTheStructuredAnswer(t *testing.T) {
	r := runFake(t, "success", agent.Want{Subject: true, Report: true}, Profile{Model: "gemini-2.5-pro"})
	if r.err != nil || r.out.CommitSubject != "feat: add G.md" || r.out.Summary != "Added G.md." ||
		!slices.Equal(r.out.Changes, []string{"G.md: new file with one line"}) {
		t.Fatalf("%+v, %v", r.out, r.err)
	}
	if !slices.Equal(r.texts, []plugin.Stage{plugin.StageStarted, plugin.StageWorking, plugin.StageFinalizing}) {
		t.Fatalf("stages %v", r.texts)
	}
	if !slices.Equal(r.argv, []string{"--prompt", "", "--output-format", "stream-json", "--model", "gemini-2.5-pro"}) {
		t.Fatalf("argv %q", r.argv)
	}
	if r.set != string(Settings()) {
		t.Fatalf("settings %q", r.set)
	}
	var s map[string]any
	if err := json.Unmarshal(Settings(), &s); err != nil || !strings.Contains(r.set, `"core":["read_file","list_directory","replace","write_file"]`) {
		t.Fatalf("settings are not the JSON document with the tools: %v", err)
	}
	// The run's own variables, and no ambient one.
	home, tmp := r.env["HOME"], r.env["TMPDIR"]
	if !strings.HasPrefix(home, r.tmp+"/forge-gemini-") || filepath.Base(home) != HomeDir || filepath.Join(filepath.Dir(home), TmpDir) != tmp {
		t.Fatalf("HOME %q, TMPDIR %q", home, tmp)
	}
	for k, v := range map[string]string{
		"GEMINI_API_KEY":                  "68", // the credential's length (the fake hides it)
		"GOOGLE_GEMINI_BASE_URL":          agenttest.GatewayURL + "/g",
		"GEMINI_CLI_TRUST_WORKSPACE":      "false",
		"GEMINI_CLI_NO_RELAUNCH":          "true",
		"GEMINI_CLI_SYSTEM_SETTINGS_PATH": filepath.Join(filepath.Dir(home), NoneDir, "settings.json"),
		"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": filepath.Join(filepath.Dir(home), NoneDir, "system-defaults.json"),
	} {
		if r.env[k] != v {
			t.Errorf("%s=%q, want %q", k, r.env[k], v)
		}
	}
	for k, v := range r.env {
		if strings.Contains(v, "canary") || strings.HasPrefix(k, "FORGE_GATEWAY_") || k == "NODE_OPTIONS" || k == "SANDBOX" ||
			strings.EqualFold(k, "https_proxy") || k == "GOOGLE_API_KEY" || k == "GEMINI_CLI_HOME" {
			t.Errorf("ambient variable %s reached Gemini CLI", k)
		}
	}
}

func TestRunDiagnosticsAndDroppedAnswers(t *testing.T) {
	want := agent.Want{Subject: true}
	for mode, diagnostics := range map[string]int{"tool-error": 1, "warning": 1} {
		r := runFake(t, mode, want, Profile{})
		if r.err != nil || r.out.CommitSubject != "feat: add G.md" || r.out.Diagnostics != diagnostics {
			t.Fatalf("%s: %+v, %v", mode, r.out, r.err)
		}
		if slices.Contains(r.argv, "--model") {
			t.Fatalf("%s: argv %q names a model the profile did not", mode, r.argv)
		}
	}
	// An answer in a code fence is not the JSON object: dropped, not repaired.
	r := runFake(t, "fenced", want, Profile{})
	if r.err != nil || r.out.CommitSubject != "" || !r.out.SubjectDropped {
		t.Fatalf("fenced: %+v, %v", r.out, r.err)
	}
	// Without a structured answer the prompt asks for none.
	r = runFake(t, "success", agent.Want{}, Profile{})
	if r.err != nil || r.out.CommitSubject != "" || r.out.SubjectDropped {
		t.Fatalf("unstructured: %+v, %v", r.out, r.err)
	}
}

func TestRunFailures(t *testing.T) {
	for mode, c := range map[string]struct {
		reason agent.Reason
		cat    plugin.Category
	}{
		"auth-refused":  {agent.ReasonAuthRefused, plugin.CategoryIncompatible},
		"result-error":  {agent.ReasonExit, plugin.CategoryExecutionFailed}, // the CLI exits 1 after a failed result
		"no-result":     {agent.ReasonNoCompletion, plugin.CategoryExecutionFailed},
		"exit-nonzero":  {agent.ReasonExit, plugin.CategoryExecutionFailed},
		"unknown-event": {agent.ReasonUnexpectedEvent, plugin.CategoryExecutionFailed},
		"late-event":    {agent.ReasonUnexpectedEvent, plugin.CategoryExecutionFailed},
		"malformed":     {agent.ReasonMalformedEvents, plugin.CategoryExecutionFailed},
	} {
		t.Run(mode, func(t *testing.T) {
			r := runFake(t, mode, agent.Want{Subject: true}, Profile{})
			agenttest.RequireReason(t, r.err, c.reason, c.cat, agenttest.Credential, "canary")
		})
	}
	t.Run("echoed credential is redacted", func(t *testing.T) {
		r := runFake(t, "result-error", agent.Want{Subject: true}, Profile{}, "FAKE_GEMINI_ECHO_KEY=1")
		var ae *agent.Error
		if !errorsAs(r.err, &ae) || strings.Contains(string(ae.Tail), agenttest.Credential) || !strings.Contains(string(ae.Tail), "[redacted]") {
			t.Fatalf("tail %q", ae.Tail)
		}
	})
}

// Without the gateway, or without a provider of its kind, Gemini CLI never
// starts: a misconfiguration.
func TestRunNeedsTheGateway(t *testing.T) {
	ws := agenttest.GitWorkspace(t)
	for name, c := range map[string]struct {
		env      []string
		provider string
		reason   agent.Reason
	}{
		"no gateway":       {nil, "", agent.ReasonNoGateway},
		"no gemini":        {agenttest.GatewayEnv("a=anthropic-messages"), "", agent.ReasonGatewayChoice},
		"two geminis":      {agenttest.GatewayEnv("g=gemini-generate-content,h=gemini-generate-content"), "", agent.ReasonGatewayChoice},
		"unknown provider": {agenttest.GatewayEnv("g=gemini-generate-content"), "other", agent.ReasonGatewayProvider},
		"wrong kind":       {agenttest.GatewayEnv("g=gemini-generate-content,a=anthropic-messages"), "a", agent.ReasonGatewayProvider},
	} {
		t.Run(name, func(t *testing.T) {
			argv := filepath.Join(t.TempDir(), "argv")
			_, err := Run(context.Background(), Config{Bin: fakeGemini(t), TempDir: t.TempDir(), Profile: Profile{Provider: c.provider},
				Env: append(c.env, "PATH=/usr/bin:/bin", "FAKE_GEMINI_ARGV_FILE="+argv)},
				agent.Request{Workspace: ws, Instruction: "x", Timeout: time.Minute}, nil)
			agenttest.RequireReason(t, err, c.reason, plugin.CategoryIncompatible)
			if _, err := os.Stat(argv); err == nil {
				t.Fatal("Gemini CLI started")
			}
		})
	}
	_, err := Run(context.Background(), Config{Bin: filepath.Join(t.TempDir(), "gemini"), Env: agenttest.GatewayEnv("g=gemini-generate-content")},
		agent.Request{Workspace: ws, Instruction: "x", Timeout: time.Minute}, nil)
	agenttest.RequireReason(t, err, agent.ReasonUnavailable, plugin.CategoryIncompatible)
}

// The adapter drops every variable of the families that steer Gemini CLI
// and keeps the rest.
func TestEnvDropsWhatSteersGeminiCLI(t *testing.T) {
	gw := agent.Gateway{Provider: "g", BaseURL: "http://127.0.0.1:1/g", Credential: agenttest.Credential}
	env := Env(append(ambient, "PATH=/bin", "LANG=C.UTF-8", "GEMINI_BIN=/x/gemini"), gw, "/r/home", "/r/tmp", "/r/none")
	for _, kv := range env {
		if strings.Contains(kv, "canary") || strings.HasPrefix(kv, "GEMINI_BIN=") {
			t.Errorf("kept %q", kv)
		}
	}
	for _, kv := range []string{"PATH=/bin", "LANG=C.UTF-8", "HOME=/r/home", "TMPDIR=/r/tmp", "GEMINI_API_KEY=" + agenttest.Credential} {
		if !slices.Contains(env, kv) {
			t.Errorf("missing %q", kv)
		}
	}
}

func errorsAs(err error, target **agent.Error) bool { return errors.As(err, target) }

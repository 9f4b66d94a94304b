package agentplugin_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agentplugin"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
	"github.com/0k-lab/agent-forge/pkg/claude"
	"github.com/0k-lab/agent-forge/pkg/codex"
	"github.com/0k-lab/agent-forge/pkg/gemini"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

func TestMain(m *testing.M) {
	agenttest.ServeReaper()
	os.Exit(m.Run())
}

// contractOffer is the Worker's providers in the contract: one of each
// kind the adapters speak.
const contractOffer = "anthropic=anthropic-messages,gemini=gemini-generate-content,openai=openai-responses"

// implementation is one adapter under the contract, with its fake CLI's
// name for each behaviour.
type implementation struct {
	name  string
	modes map[string]string // contract behaviour -> the fake's mode
	build func(t *testing.T, mode, pidFile string) agentplugin.Adapter
}

func implementations() []implementation {
	return []implementation{
		{
			name: "codex",
			modes: map[string]string{"complete": "success", "no-completion": "no-completion", "unknown": "unknown-event",
				"late": "late-unknown", "malformed": "malformed-event", "provider-failure": "turn-failed-exit0",
				"refused": "status-401", "hang": "hang", "diagnostic": "retried-error"},
			build: func(t *testing.T, mode, pidFile string) agentplugin.Adapter {
				return codex.Adapter{Config: codex.Config{Bin: agenttest.FakeCodex(t), Reaper: agenttest.Reapers(t), TempDir: t.TempDir(),
					Env: append(agenttest.GatewayEnv(contractOffer), "PATH=/usr/bin:/bin", "FAKE_CODEX_MODE="+mode, "FAKE_CODEX_PID_FILE="+pidFile)}}
			},
		},
		{
			name: "claude",
			modes: map[string]string{"complete": "success", "no-completion": "no-result", "unknown": "unknown-event",
				"late": "late-event", "malformed": "malformed", "provider-failure": "result-error",
				"refused": "auth-refused", "hang": "hang", "diagnostic": "tool-error"},
			build: func(t *testing.T, mode, pidFile string) agentplugin.Adapter {
				return claude.Adapter{Config: claude.Config{Bin: agenttest.FakeClaude(t), Reaper: agenttest.Reapers(t), TempDir: t.TempDir(),
					Env: append(agenttest.GatewayEnv(contractOffer), "PATH=/usr/bin:/bin", "FAKE_CLAUDE_MODE="+mode, "FAKE_CLAUDE_PID_FILE="+pidFile)}}
			},
		},
		{
			name: "gemini",
			modes: map[string]string{"complete": "success", "no-completion": "no-result", "unknown": "unknown-event",
				"late": "late-event", "malformed": "malformed", "provider-failure": "result-error",
				"refused": "auth-refused", "hang": "hang", "diagnostic": "tool-error"},
			build: func(t *testing.T, mode, pidFile string) agentplugin.Adapter {
				return gemini.Adapter{Config: gemini.Config{Bin: agenttest.Program(t, "fake-gemini-cli/gemini"), Reaper: agenttest.Reapers(t), TempDir: t.TempDir(),
					Env: append(agenttest.GatewayEnv(contractOffer), "PATH=/usr/bin:/bin", "FAKE_GEMINI_MODE="+mode, "FAKE_GEMINI_PID_FILE="+pidFile)}}
			},
		},
	}
}

// TestAdapterContract runs the same behavioural contract against every
// adapter (agent-adapters.md, "Adapter contract suite"), each with its
// deterministic fake CLI: normal completion with a structured answer,
// diagnostics that do not decide, provider completion distinct from
// process exit, unknown and late events failing closed, a malformed line,
// a provider failure, refused credentials as a misconfiguration, and
// cancellation and timeout leaving no process behind.
func TestAdapterContract(t *testing.T) {
	want := agent.Want{Subject: true, Report: true}
	failures := []struct {
		behaviour string
		reason    agent.Reason
		category  plugin.Category
	}{
		{"no-completion", agent.ReasonNoCompletion, plugin.CategoryExecutionFailed},
		{"unknown", agent.ReasonUnexpectedEvent, plugin.CategoryExecutionFailed},
		{"late", agent.ReasonUnexpectedEvent, plugin.CategoryExecutionFailed},
		{"malformed", agent.ReasonMalformedEvents, plugin.CategoryExecutionFailed},
		{"refused", agent.ReasonAuthRefused, plugin.CategoryIncompatible},
	}
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			run := func(t *testing.T, behaviour string, ctx context.Context, timeout time.Duration) (agent.Outcome, []plugin.Stage, error, string) {
				pids := filepath.Join(t.TempDir(), "pids")
				ad := impl.build(t, impl.modes[behaviour], pids)
				caps := ad.Capabilities()
				if !caps.StructuredEvents || !caps.StructuredAnswer || caps.Resume || caps.DecisionBackchannel ||
					!slices.Contains(caps.PluginCapabilities(), plugin.CapCommitSubject) {
					t.Fatalf("capabilities %+v", caps)
				}
				var stages []plugin.Stage
				out, err := ad.Run(ctx, agent.Request{Workspace: agenttest.GitWorkspace(t), Timeout: timeout, Want: want,
					Instruction: "Create a file named C.md containing one line: contract."},
					func(s plugin.Stage, _ string) error { stages = append(stages, s); return nil })
				return out, stages, err, pids
			}
			t.Run("complete", func(t *testing.T) {
				out, stages, err, _ := run(t, "complete", context.Background(), time.Minute)
				if err != nil || out.CommitSubject != "feat: add C.md" || !out.HasReport() {
					t.Fatalf("outcome %+v, %v", out, err)
				}
				if !slices.Equal(stages, []plugin.Stage{plugin.StageStarted, plugin.StageWorking, plugin.StageFinalizing}) {
					t.Fatalf("stages %v", stages)
				}
			})
			t.Run("diagnostic", func(t *testing.T) {
				out, _, err, _ := run(t, "diagnostic", context.Background(), time.Minute)
				if err != nil || out.Diagnostics == 0 || out.CommitSubject == "" {
					t.Fatalf("outcome %+v, %v", out, err)
				}
			})
			t.Run("provider-failure", func(t *testing.T) {
				_, stages, err, _ := run(t, "provider-failure", context.Background(), time.Minute)
				if agent.CategoryOf(err) != plugin.CategoryExecutionFailed || slices.Contains(stages, plugin.StageFinalizing) {
					t.Fatalf("%v, stages %v", err, stages)
				}
			})
			for _, tc := range failures {
				t.Run(tc.behaviour, func(t *testing.T) {
					_, _, err, _ := run(t, tc.behaviour, context.Background(), time.Minute)
					if agent.ReasonOf(err) != tc.reason || agent.CategoryOf(err) != tc.category {
						t.Fatalf("%v (%s), want %q (%s)", err, agent.CategoryOf(err), tc.reason, tc.category)
					}
				})
			}
			for _, stop := range []string{"cancel", "timeout"} {
				t.Run(stop, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					timeout := time.Minute
					if stop == "timeout" {
						timeout = 2 * time.Second
					} else {
						time.AfterFunc(time.Second, cancel)
					}
					_, _, err, pids := run(t, "hang", ctx, timeout)
					wantReason := map[string]agent.Reason{"cancel": agent.ReasonCancelled, "timeout": agent.ReasonTimeout}[stop]
					if agent.ReasonOf(err) != wantReason {
						t.Fatalf("%v, want %q", err, wantReason)
					}
					agenttest.RequireGone(t, pids)
				})
			}
		})
	}
}

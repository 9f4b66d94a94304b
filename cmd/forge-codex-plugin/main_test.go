package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agentplugin"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/codex"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/conformance"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
)

// pluginArg turns the test binary into forge-codex-plugin (see TestMain),
// so sessions run in a real separate process without a build step.
const pluginArg = "forge-codex-plugin-under-test"

func TestMain(m *testing.M) {
	agenttest.ServeReaper()
	if len(os.Args) > 1 && os.Args[1] == pluginArg {
		main2(os.Args[2:])
	}
	os.Exit(m.Run())
}

// main2 is main with the marker argument removed.
func main2(args []string) {
	os.Exit(agentplugin.ExitCode(agentplugin.Run(context.Background(), codexPlugin(), args, os.Stdin, os.Stdout, os.Stderr)))
}

// raceExitNow keeps a -race build of the plugin process from sleeping a
// second at exit (the race runtime's default), which would break the
// protocol's 250 ms exit window; other builds ignore it.
const raceExitNow = "GORACE=atexit_sleep_ms=0"

const instruction = "Create a file named NOTES.md containing one line: edited by codex."

// testOffer is the Worker's providers the plugin is handed (with the rest
// of agenttest.GatewayEnv) in every session.
const testOffer = "openai=openai-responses"

var fullOffer = []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapProgress, plugin.CapCancel,
	plugin.CapCommitSubject, plugin.CapAgentReport}

func head(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", dir, "rev-parse", "HEAD")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// session is one Worker-side run of the plugin process through
// pkg/plugin/host, the Worker's own runner.
type session struct {
	t         *testing.T
	env       []string
	offer     []plugin.Capability
	workspace string
	instr     string
	timeoutMS int64
	budget    int64
	files     string

	mu       sync.Mutex
	frames   []plugin.Frame // frames from the plugin
	progress []host.Progress
	working  chan struct{}
	once     sync.Once
}

func newSession(t *testing.T, env ...string) *session {
	files := t.TempDir()
	return &session{
		t: t,
		env: append([]string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(), raceExitNow,
			"FAKE_CODEX_ARGV_FILE=" + filepath.Join(files, "argv.json"),
			"FAKE_CODEX_PROMPT_FILE=" + filepath.Join(files, "prompt.txt"),
			"FAKE_CODEX_PID_FILE=" + filepath.Join(files, "pids")}, env...),
		offer:     fullOffer,
		workspace: agenttest.GitWorkspace(t),
		instr:     instruction,
		timeoutMS: 60000,
		budget:    64 << 10, // far below Codex's output in the huge modes
		files:     files,
		working:   make(chan struct{}),
	}
}

func (s *session) run(ctx context.Context) (host.Outcome, error) {
	return host.Run(ctx, host.Command{
		Path: agenttest.Self(s.t), Args: []string{pluginArg}, Env: append(agenttest.GatewayEnv(testOffer), s.env...), Reaper: agenttest.Reapers(s.t),
		OutputBytes: s.budget,
		Trace: func(dir host.Direction, b []byte) {
			if dir != host.FromPlugin {
				return
			}
			f, err := plugin.DecodeFrame(b)
			if err != nil {
				s.t.Errorf("trace: %v", err)
				return
			}
			s.mu.Lock()
			s.frames = append(s.frames, f)
			s.mu.Unlock()
		},
	}, host.Request{Offer: s.offer, Operation: plugin.OpWorkspaceEdit, Workspace: s.workspace,
		Instruction: s.instr, TimeoutMS: s.timeoutMS}, func(p host.Progress) {
		s.mu.Lock()
		s.progress = append(s.progress, p)
		s.mu.Unlock()
		if p.Stage == plugin.StageWorking {
			s.once.Do(func() { close(s.working) })
		}
	})
}

// terminal returns the plugin's terminal frame.
func (s *session) terminal() plugin.Frame {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.frames) == 0 || !s.frames[len(s.frames)-1].Type.Terminal() {
		s.t.Fatalf("no terminal frame among %d frames", len(s.frames))
	}
	return s.frames[len(s.frames)-1]
}

func (s *session) requireFailure(err error, cat plugin.Category) {
	s.t.Helper()
	if f := s.terminal(); f.Type != plugin.TypeFailure || f.Category != cat {
		s.t.Fatalf("terminal frame %s/%s, want failure %s (run error %v)", f.Type, f.Category, cat, err)
	}
}

func (s *session) requireHeadUnmoved(base string) {
	s.t.Helper()
	if got := head(s.t, s.workspace); got != base {
		s.t.Fatal("HEAD moved")
	}
}

func TestSessionSuccessWithSubjectAndReport(t *testing.T) {
	s := newSession(t)
	base := head(t, s.workspace)
	out, err := s.run(context.Background())
	if err != nil {
		t.Fatalf("host.Run: %v", err)
	}
	if !slices.Equal(out.Selected, fullOffer) {
		t.Fatalf("selection %v, want every offered capability", out.Selected)
	}
	if out.CommitSubject == nil || *out.CommitSubject != "feat: add NOTES.md" {
		t.Fatalf("commit subject %v", out.CommitSubject)
	}
	if out.Summary == nil || *out.Summary != "Created NOTES.md with one line." || !slices.Equal(out.Changes, []string{"NOTES.md: new file with one line"}) {
		t.Fatalf("report %v %q", out.Summary, out.Changes)
	}
	b, err := os.ReadFile(filepath.Join(s.workspace, "NOTES.md"))
	if err != nil || string(b) != "edited by codex\n" {
		t.Fatalf("workspace not edited: %q %v", b, err)
	}
	s.requireHeadUnmoved(base)
	var stages []string
	for _, p := range s.progress {
		stages = append(stages, string(p.Stage)+":"+p.Text)
	}
	if want := []string{"started:codex started", "working:codex editing", "finalizing:codex finished"}; !slices.Equal(stages, want) {
		t.Fatalf("progress %q, want %q", stages, want)
	}
	var argv []string
	b, err = os.ReadFile(filepath.Join(s.files, "argv.json"))
	if err != nil || json.Unmarshal(b, &argv) != nil {
		t.Fatal("argv not recorded")
	}
	i := slices.Index(argv, "--output-schema")
	if i < 0 || i+3 >= len(argv) {
		t.Fatalf("argv %q", argv)
	}
	if want := codex.Args(s.workspace, agent.Want{Subject: true, Report: true}, argv[i+1], argv[i+3]); !slices.Equal(argv, want) {
		t.Fatalf("argv\n got %q\nwant %q", argv, want)
	}
	prompt, err := os.ReadFile(filepath.Join(s.files, "prompt.txt"))
	if err != nil || !strings.Contains(string(prompt), instruction) || !strings.Contains(string(prompt), "Do not commit.") {
		t.Fatal("prompt on stdin lacks the instruction or the constraints")
	}
}

func TestSessionWithoutDescriptionCapabilities(t *testing.T) {
	s := newSession(t)
	s.offer = []plugin.Capability{plugin.CapWorkspaceEdit}
	out, err := s.run(context.Background())
	if err != nil {
		t.Fatalf("host.Run: %v", err)
	}
	if !slices.Equal(out.Selected, s.offer) || out.CommitSubject != nil || out.Summary != nil || out.Changes != nil || len(s.progress) != 0 {
		t.Fatalf("outcome %+v with a minimal offer", out)
	}
	b, _ := os.ReadFile(filepath.Join(s.files, "argv.json"))
	if bytes.Contains(b, []byte("--output-schema")) {
		t.Fatal("structured output requested although nothing was negotiated")
	}
}

func TestSessionOmitsInvalidDescriptions(t *testing.T) {
	tests := []struct {
		name          string
		env           string
		subject, keep bool
	}{
		{"invalid structured output", "FAKE_CODEX_MODE=invalid-output", false, false},
		{"two-line subject", "FAKE_CODEX_SUBJECT=feat: one\nfeat: two", false, true},
		{"control character", "FAKE_CODEX_SUBJECT=feat: tab\there", false, true},
		{"too long", "FAKE_CODEX_SUBJECT=feat: " + strings.Repeat("é", 130), false, true},
		{"invalid report", `FAKE_CODEX_LAST_MESSAGE={"commit_subject":"fix: x","summary":"","changes":["a"]}`, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, tc.env)
			out, err := s.run(context.Background())
			if err != nil {
				t.Fatalf("an invalid description failed the session: %v", err)
			}
			if (out.CommitSubject != nil) != tc.subject || (out.Summary != nil) != tc.keep || (out.Changes != nil) != tc.keep {
				t.Fatalf("outcome subject=%v summary=%v changes=%v", out.CommitSubject, out.Summary, out.Changes)
			}
		})
	}
}

func TestSessionFailures(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		ms   int64
		cat  plugin.Category
	}{
		{"crash", []string{"FAKE_CODEX_MODE=crash"}, 60000, plugin.CategoryExecutionFailed},
		{"provider failure", []string{"FAKE_CODEX_MODE=turn-failed-exit0"}, 60000, plugin.CategoryExecutionFailed},
		{"malformed event", []string{"FAKE_CODEX_MODE=malformed-event"}, 60000, plugin.CategoryExecutionFailed},
		{"hang until the timeout", []string{"FAKE_CODEX_MODE=hang"}, 1500, plugin.CategoryExecutionFailed},
		{"huge stdout", []string{"FAKE_CODEX_MODE=huge-output", "FAKE_CODEX_HUGE_BYTES=83886080"}, 60000, plugin.CategoryExecutionFailed},
		{"missing CODEX_BIN", []string{"CODEX_BIN=/nonexistent/codex"}, 60000, plugin.CategoryIncompatible},
		// PATH is searched for "codex"; an empty directory guarantees a miss
		// (and never runs a real Codex installed on this machine).
		{"codex not on PATH", []string{"CODEX_BIN=", "PATH=" + os.TempDir() + "/forge-codex-plugin-test-empty-path"}, 60000, plugin.CategoryIncompatible},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, tc.env...)
			s.timeoutMS = tc.ms
			base := head(t, s.workspace)
			_, err := s.run(context.Background())
			if host.KindOf(err) != host.KindFailure {
				t.Fatalf("host.Run: %v, want a failure frame", err)
			}
			s.requireFailure(err, tc.cat)
			s.requireHeadUnmoved(base)
		})
	}
}

func TestSessionCancelStopsCodex(t *testing.T) {
	s := newSession(t, "FAKE_CODEX_MODE=hang")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.working
		cancel()
	}()
	_, err := s.run(ctx)
	if host.KindOf(err) != host.KindCancelled {
		t.Fatalf("host.Run: %v, want cancelled", err)
	}
	s.requireFailure(err, plugin.CategoryCancelled)
	agenttest.RequireGone(t, filepath.Join(s.files, "pids"))
}

// inProcess runs one session through runWith in this process, so its
// stderr can be inspected.
func inProcess(t *testing.T, env []string, ws string) (frames []plugin.Frame, stderr string, err error) {
	t.Helper()
	return inProcessArgs(t, nil, env, ws)
}

func inProcessArgs(t *testing.T, args, env []string, ws string) (frames []plugin.Frame, stderr string, err error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errBuf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := agentplugin.RunWith(context.Background(), codexPlugin(), agentplugin.Setup{Env: append(agenttest.GatewayEnv(testOffer), env...), Reaper: agenttest.Reapers(t)}, args, inR, outW, &errBuf)
		outW.Close()
		done <- err
	}()
	const id = "0123456789abcdef0123456789abcdef"
	write := func(f plugin.Frame) {
		b, err := plugin.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inW.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(outR)
	read := func() plugin.Frame {
		line, err := plugin.ReadFrame(r)
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		f, err := plugin.DecodeFrame(line)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	write(plugin.Frame{ID: id, Type: plugin.TypeInitialize, Capabilities: fullOffer, Limits: plugin.V1Limits()})
	frames = append(frames, read())
	write(plugin.Frame{ID: id, Type: plugin.TypeExecute, Operation: plugin.OpWorkspaceEdit, Workspace: ws,
		Instruction: instruction, TimeoutMS: 60000})
	for {
		f := read()
		frames = append(frames, f)
		if f.Type.Terminal() {
			break
		}
	}
	inW.Close()
	if rest, _ := io.ReadAll(outR); len(rest) != 0 {
		t.Fatal("bytes after the terminal frame")
	}
	err = <-done
	return frames, errBuf.String(), err
}

func TestExecutorOutputNeverLeavesThePlugin(t *testing.T) {
	ws := agenttest.GitWorkspace(t)
	env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(), "FAKE_CODEX_MODE=crash"}
	frames, stderr, err := inProcess(t, env, ws)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	last := frames[len(frames)-1]
	if last.Type != plugin.TypeFailure || last.Category != plugin.CategoryExecutionFailed {
		t.Fatalf("terminal %s/%s", last.Type, last.Category)
	}
	for _, f := range frames {
		if f.Type == plugin.TypeProgress && !slices.Contains([]string{codex.TextStarted, codex.TextWorking, codex.TextFinalized}, f.Text) {
			t.Fatalf("progress text %q is not fixed", f.Text)
		}
	}
	// stderr (private to the Worker) holds the fixed reason, then the
	// quoted raw tail of Codex's event stream; Codex's own stderr never.
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 2 || lines[0] != name+": codex: "+string(agent.ReasonExit) ||
		!strings.HasPrefix(lines[1], name+": codex: raw event tail (redacted): \"") {
		t.Fatalf("stderr %q, want the fixed diagnostic and the raw tail", stderr)
	}
	if strings.Contains(stderr, "panicked") || strings.Contains(stderr, ws) {
		t.Fatalf("executor stderr or a path reached stderr: %q", stderr)
	}
}

// TestCompletionRulesAreClosed: Codex's success check is a closed table
// (issue 29): each of these streams ends in execution_failed, and nothing
// of the stream reaches a frame.
func TestCompletionRulesAreClosed(t *testing.T) {
	for _, mode := range []string{"unknown-event", "no-turn-start", "second-turn", "late-unknown", "late-error"} {
		t.Run(mode, func(t *testing.T) {
			env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(), "FAKE_CODEX_MODE=" + mode}
			frames, stderr, err := inProcess(t, env, agenttest.GitWorkspace(t))
			if err != nil {
				t.Fatal(err)
			}
			if last := frames[len(frames)-1]; last.Type != plugin.TypeFailure || last.Category != plugin.CategoryExecutionFailed {
				t.Fatalf("terminal %+v, want failure execution_failed", last)
			}
			if !strings.HasPrefix(stderr, name+": codex: "+string(agent.ReasonUnexpectedEvent)+"\n") {
				t.Fatalf("stderr %q", stderr)
			}
		})
	}
}

// TestRawTailRedactsTheCredential: the raw tail written after a failed
// run never holds the gateway credential, even when Codex repeats it.
func TestRawTailRedactsTheCredential(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(),
		"FAKE_CODEX_MODE=late-error", "FAKE_CODEX_ECHO_ENV=" + codex.KeyEnv}
	frames, stderr, err := inProcess(t, env, agenttest.GitWorkspace(t))
	if err != nil {
		t.Fatal(err)
	}
	if last := frames[len(frames)-1]; last.Type != plugin.TypeFailure {
		t.Fatalf("terminal %+v", last)
	}
	if !strings.Contains(stderr, "canary-late-error [redacted]") || strings.Contains(stderr, agenttest.Credential) {
		t.Fatalf("stderr %q: want the raw tail with the credential redacted", stderr)
	}
}

func TestRetriedErrorsCountedNotForwarded(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(), "FAKE_CODEX_MODE=retried-error"}
	frames, stderr, err := inProcess(t, env, agenttest.GitWorkspace(t))
	if err != nil {
		t.Fatal(err)
	}
	if last := frames[len(frames)-1]; last.Type != plugin.TypeResult || last.CommitSubject == nil {
		t.Fatalf("terminal %+v", last)
	}
	if stderr != name+": codex: completed after 2 diagnostic events (retries, tool errors, fallbacks)\n" {
		t.Fatalf("stderr %q", stderr)
	}
	for _, f := range frames {
		if b, _ := json.Marshal(f); strings.Contains(string(b), "canary") {
			t.Fatalf("error text reached a frame: %s", b)
		}
	}
}

// TestProfileReachesCodexThroughTheGateway: the profile's model and
// provider reach Codex's private configuration, whose provider is the
// gateway and whose key is the credential.
func TestProfileReachesCodexThroughTheGateway(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "codex.json")
	os.WriteFile(profile, []byte(`{"version":1,"model":"gpt-5.5","provider":"openai"}`), 0o600)
	record := filepath.Join(dir, "home.json")
	env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(), "FAKE_CODEX_HOME_FILE=" + record}
	frames, _, err := inProcessArgs(t, []string{"-profile", profile}, env, agenttest.GitWorkspace(t))
	if err != nil {
		t.Fatal(err)
	}
	if last := frames[len(frames)-1]; last.Type != plugin.TypeResult {
		t.Fatalf("terminal %+v", last)
	}
	var r struct {
		Entries map[string]string `json:"entries"`
		Config  string            `json:"config"`
	}
	b, err := os.ReadFile(record)
	if err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("no home record: %v", err)
	}
	if len(r.Entries) != 1 || !strings.Contains(r.Config, `model = "gpt-5.5"`) ||
		!strings.Contains(r.Config, `base_url = "`+agenttest.GatewayURL+`/openai"`) || !strings.Contains(r.Config, `env_key = "FORGE_GATEWAY_TOKEN"`) {
		t.Fatalf("Codex home %+v", r)
	}
}

// TestOldProfileIsRefusedWithWhatToWrite: a profile from before the
// gateway fails every execute as incompatible, and stderr says what to
// write instead.
func TestOldProfileIsRefusedWithWhatToWrite(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "codex.json")
	os.WriteFile(old, []byte(`{"version":1,"provider":{"name":"gw","base_url":"https://llm.example.com/v1","wire_api":"responses","env_key":"LLM_KEY"}}`), 0o600)
	env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir()}
	frames, stderr, err := inProcessArgs(t, []string{"-profile", old}, env, agenttest.GitWorkspace(t))
	if err != nil {
		t.Fatal(err)
	}
	if last := frames[len(frames)-1]; last.Type != plugin.TypeFailure || last.Category != plugin.CategoryIncompatible {
		t.Fatalf("terminal %+v, want failure incompatible", last)
	}
	if !strings.HasPrefix(stderr, name+": error: codex profile: "+codex.ReasonOldProvider+"\n") || strings.Contains(stderr, "LLM_KEY") {
		t.Fatalf("stderr %q", stderr)
	}
}

// TestInvalidProfileIsAMisconfiguration: an unusable profile does not
// break the session (that would be retried): the plugin negotiates and
// answers the execute with failure incompatible, which the Worker reports
// as the terminal plugin_incompatible, after one value-free stderr line.
func TestInvalidProfileIsAMisconfiguration(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version":1,"model":"gpt-5.5","approval_policy":"canary-never"}`), 0o600)
	for _, path := range []string{bad, filepath.Join(dir, "missing.json")} {
		record := filepath.Join(t.TempDir(), "argv.json")
		env := []string{"PATH=/usr/bin:/bin", "CODEX_BIN=" + agenttest.FakeCodex(t), "TMPDIR=" + t.TempDir(), "FAKE_CODEX_ARGV_FILE=" + record}
		frames, stderr, err := inProcessArgs(t, []string{"-profile", path}, env, agenttest.GitWorkspace(t))
		if err != nil {
			t.Fatalf("session: %v", err)
		}
		if last := frames[len(frames)-1]; last.Type != plugin.TypeFailure || last.Category != plugin.CategoryIncompatible {
			t.Fatalf("terminal %+v, want failure incompatible", last)
		}
		if !strings.HasPrefix(stderr, name+": error: codex profile: ") || strings.Contains(stderr, "canary") ||
			strings.Contains(stderr, dir) {
			t.Fatalf("stderr %q", stderr)
		}
		if _, err := os.Stat(record); err == nil {
			t.Fatal("Codex started with an invalid profile")
		}
	}
}

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := agentplugin.RunWith(context.Background(), codexPlugin(), agentplugin.Setup{}, []string{"--version"}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if out.String() != buildinfo.Line(name)+"\n" {
		t.Fatalf("version %q", out.String())
	}
	out.Reset()
	err := agentplugin.RunWith(context.Background(), codexPlugin(), agentplugin.Setup{}, []string{"extra"}, strings.NewReader(""), &out, &errb)
	if agentplugin.ExitCode(err) != 2 || out.Len() != 0 {
		t.Fatalf("usage error: exit %d, stdout %q", agentplugin.ExitCode(err), out.String())
	}
}

func TestInvalidInitializeWritesNothing(t *testing.T) {
	var out, errb bytes.Buffer
	err := agentplugin.RunWith(context.Background(), codexPlugin(), agentplugin.Setup{}, nil, strings.NewReader("{}\n"), &out, &errb)
	if agentplugin.ExitCode(err) != 1 || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q", agentplugin.ExitCode(err), out.String())
	}
}

func TestConformanceWithFakeCodex(t *testing.T) {
	sum, err := conformance.Run(context.Background(), conformance.Config{
		Command:   []string{agenttest.Self(t), pluginArg},
		Operation: plugin.OpWorkspaceEdit,
		Env:       append(agenttest.GatewayEnv(testOffer), "PATH=/usr/bin:/bin", "CODEX_BIN="+agenttest.FakeCodex(t), raceExitNow),
		TempDir:   t.TempDir(),
		Reaper:    agenttest.Reapers(t),
	}, func(r conformance.Result) {
		if !r.Passed() {
			t.Errorf("%s", r.Line())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(conformance.Scenarios(plugin.OpWorkspaceEdit)); sum.Total != want || sum.Passed != want {
		t.Fatalf("%s", sum.Line(plugin.OpWorkspaceEdit))
	}
}

// Codex's run directory goes into the plugin's working directory when the
// Worker made that private, else into TMPDIR.
func TestPrivateWorkDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugin-1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if got := agentplugin.PrivateWorkDir(); got != dir {
		t.Fatalf("private working directory: got %q", got)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := agentplugin.PrivateWorkDir(); got != "" {
		t.Fatalf("shared working directory used: %q", got)
	}
}

const name = "forge-codex-plugin"

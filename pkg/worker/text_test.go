package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// pluginConfig is a host-checked config whose plugins are test plugin
// modes of this test binary, plus a listening socket for "block".
func pluginConfig(t *testing.T) (*Config, net.Listener) {
	t.Helper()
	c, dir := hostFixture(t)
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	exe := testBinary(t)
	c.Plugins = nil
	for _, mode := range []string{"upper", "env", "block", "slow", "fail", "garbage", "hang", "flood", "stubborn"} {
		argv := []string{exe, pluginArg, mode}
		if mode == "block" {
			argv = append(argv, sock)
		}
		c.Plugins = append(c.Plugins, Plugin{ID: mode, Argv: argv})
	}
	c.EnvironmentAllowlist = []string{"PATH", "CODEX_HOME", "CODEX_BIN"}
	if _, err := CheckHost(c, envWith(map[string]string{"FORGE_WORKER_TOKEN": testToken})); err != nil {
		t.Fatal(err)
	}
	return c, ln
}

func leaseFor(t *testing.T, pol []byte, input string) *wire.Lease {
	t.Helper()
	task, err := json.Marshal(wire.TextTask{Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return &wire.Lease{JobID: "j_1", AttemptID: "a_1", Ordinal: 1, DeadlineAt: time.Now().Add(time.Minute),
		Kind: wire.KindText, Policy: pol, Task: task}
}

// policyWith returns testPolicy(pluginID) with edit applied to its execution.
func policyWith(t *testing.T, pluginID string, edit func(*policy.Execution)) []byte {
	t.Helper()
	p, err := policy.Decode(testPolicy(pluginID))
	if err != nil {
		t.Fatal(err)
	}
	edit(&p.Execution)
	return p.Canonical()
}

var workerEnv = map[string]string{"PATH": "/usr/bin:/bin", "CODEX_HOME": "/tmp/codex", "FORGE_WORKER_TOKEN": testToken, "SECRET": "do-not-pass"}

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func newTestExecutor(t *testing.T, c *Config) *TextExecutor {
	reapers := supervise.NewReaperPool(testBinary(t))
	t.Cleanup(reapers.Close)
	return NewTextExecutor(c, lookupIn(workerEnv), reapers)
}

func TestTextExecutorRunsPlugin(t *testing.T) {
	c, _ := pluginConfig(t)
	r := newTestExecutor(t, c).Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("upper"), "hello agent forge")})
	if !r.Succeeded || r.Output != "HELLO AGENT FORGE" {
		t.Fatalf("report %+v", r)
	}
}

func TestPluginEnvironmentAndDirectory(t *testing.T) {
	c, _ := pluginConfig(t)
	// CODEX_BIN is allowlisted and requested but unset here: it is omitted.
	// CODEX_HOME is allowlisted but not requested, SECRET neither.
	pol := testPolicy("env", "PATH", "CODEX_BIN")
	x := newTestExecutor(t, c)
	var cwds []string
	for i := 0; i < 2; i++ {
		r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, pol, "x")})
		if !r.Succeeded {
			t.Fatalf("report %+v", r)
		}
		lines := strings.Split(r.Output, "\n")
		cwd := strings.TrimPrefix(lines[len(lines)-1], "cwd=")
		env := lines[:len(lines)-1]
		if len(env) != 1 || env[0] != "PATH=/usr/bin:/bin" {
			t.Fatalf("plugin environment %q, want only PATH", env)
		}
		if filepath.Dir(cwd) != c.RuntimeRoot {
			t.Fatal("plugin did not run in a private directory under runtime_root")
		}
		if ents, err := os.ReadDir(cwd); err != nil || len(ents) != 0 {
			t.Fatalf("the plugin's runtime directory is not empty between runs (%d, %v)", len(ents), err)
		}
		cwds = append(cwds, cwd)
	}
	if cwds[0] != cwds[1] {
		t.Fatal("an untouched runtime directory was not reused")
	}
	x.Close()
	if _, err := os.Stat(cwds[0]); !os.IsNotExist(err) {
		t.Fatal("Close did not remove the kept runtime directory")
	}
}

func TestPolicyFailsClosed(t *testing.T) {
	c, _ := pluginConfig(t)
	x := newTestExecutor(t, c)
	over := func(f func(*policy.Execution)) []byte { return policyWith(t, "upper", f) }
	cases := []struct {
		name string
		pol  []byte
		task string
		code string
	}{
		{"env outside allowlist", testPolicy("upper", "PATH", "SECRET"), "", CodeEnvironmentNotAllowed},
		{"unknown plugin", testPolicy("codex"), "", CodeUnknownPlugin},
		{"not a policy", []byte(`{"schema":"forge-policy/v1"}`), "", CodeInvalidPolicy},
		{"plugin_timeout above ceiling", over(func(e *policy.Execution) { e.PluginTimeout = policy.Duration(16 * time.Minute) }), "", CodePolicyExceedsCeiling},
		{"check_timeout above ceiling", over(func(e *policy.Execution) { e.CheckTimeout = policy.Duration(11 * time.Minute) }), "", CodePolicyExceedsCeiling},
		{"git_timeout above ceiling", over(func(e *policy.Execution) { e.GitTimeout = policy.Duration(2 * time.Minute) }), "", CodePolicyExceedsCeiling},
		{"cleanup_timeout above ceiling", over(func(e *policy.Execution) { e.CleanupTimeout = policy.Duration(11 * time.Second) }), "", CodePolicyExceedsCeiling},
		{"plugin_output_bytes above ceiling", over(func(e *policy.Execution) { e.PluginOutputBytes = 1<<20 + 1 }), "", CodePolicyExceedsCeiling},
		{"check_output_bytes above ceiling", over(func(e *policy.Execution) { e.CheckOutputBytes = 2049 }), "", CodePolicyExceedsCeiling},
		{"git_output_bytes above ceiling", over(func(e *policy.Execution) { e.GitOutputBytes = 1<<20 + 1 }), "", CodePolicyExceedsCeiling},
		{"task not text", testPolicy("upper"), `{"instruction":"x"}`, CodeInvalidTask},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := leaseFor(t, tc.pol, "x")
			if tc.task != "" {
				l.Task = json.RawMessage(tc.task)
			}
			r := x.Execute(context.Background(), &Attempt{Lease: l})
			if r.Succeeded || r.Code != tc.code {
				t.Fatalf("report %+v, want %s", r, tc.code)
			}
			if d, code := wireFailure(r.Code); d != wire.DispositionTerminal || code != tc.code {
				t.Fatalf("%s maps to %s/%s, want terminal %s", r.Code, d, code, tc.code)
			}
		})
	}
	// At the ceiling exactly is allowed.
	at := policyWith(t, "upper", func(e *policy.Execution) {
		e.PluginTimeout, e.CheckOutputBytes = policy.Duration(15*time.Minute), 2048
	})
	if r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, at, "ok")}); !r.Succeeded {
		t.Fatalf("limits equal to the ceilings rejected: %+v", r)
	}
}

func TestPluginOutcomesMapToRetryableFailures(t *testing.T) {
	c, _ := pluginConfig(t)
	x := newTestExecutor(t, c)
	cases := []struct {
		plugin string
		pol    []byte
		code   string
	}{
		{"fail", nil, CodePluginFailed},
		{"garbage", nil, CodePluginProtocolViolation},
		{"hang", policyWith(t, "hang", func(e *policy.Execution) { e.PluginTimeout = policy.Duration(200 * time.Millisecond) }), CodePluginTimeout},
		{"flood", policyWith(t, "flood", func(e *policy.Execution) { e.PluginOutputBytes = 4096 }), CodePluginOutputLimit},
	}
	for _, tc := range cases {
		t.Run(tc.plugin, func(t *testing.T) {
			pol := tc.pol
			if pol == nil {
				pol = testPolicy(tc.plugin)
			}
			r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, pol, "x")})
			if r.Succeeded || r.Cancelled || r.Code != tc.code {
				t.Fatalf("report %+v, want %s", r, tc.code)
			}
			if d, code := wireFailure(r.Code); d != wire.DispositionRetryable || code != tc.code {
				t.Fatalf("%s maps to %s/%s, want retryable %s", r.Code, d, code, tc.code)
			}
		})
	}
}

func TestDigestPinning(t *testing.T) {
	c, _ := pluginConfig(t)
	// A private copy of the plugin binary, pinned by digest.
	pinned := filepath.Join(t.TempDir(), "pinned-plugin")
	copyFile(t, testBinary(t), pinned)
	sum, err := fileSHA256(pinned)
	if err != nil {
		t.Fatal(err)
	}
	c.Plugins = append(c.Plugins, Plugin{ID: "pinned", Argv: []string{pinned, pluginArg, "upper"}, SHA256: sum})
	x := newTestExecutor(t, c)
	if r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("pinned"), "pin")}); !r.Succeeded || r.Output != "PIN" {
		t.Fatalf("pinned plugin did not run: %+v", r)
	}
	// The binary changes on disk: the next invocation refuses it.
	f, err := os.OpenFile(pinned, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("pinned"), "pin")})
	if r.Succeeded || r.Code != CodePluginIdentityMismatch {
		t.Fatalf("drifted plugin: %+v", r)
	}
	if d, _ := wireFailure(r.Code); d != wire.DispositionTerminal {
		t.Fatal("identity mismatch is retryable")
	}
	// Removing it is drift too.
	if err := os.Remove(pinned); err != nil {
		t.Fatal(err)
	}
	if r := x.Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("pinned"), "pin")}); r.Code != CodePluginIdentityMismatch {
		t.Fatalf("missing pinned plugin: %+v", r)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// blockingPlugin accepts the "block" plugin's connection and returns a
// reader of its lines.
func acceptPlugin(t *testing.T, ln net.Listener) *bufio.Scanner {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(); ch <- res{c, err} }()
	r := recv(t, ch, "the plugin to start")
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	sc := bufio.NewScanner(r.c)
	if !sc.Scan() || sc.Text() != "started" {
		t.Fatal("plugin did not report start")
	}
	return sc
}

func expectCancelled(t *testing.T, sc *bufio.Scanner) {
	t.Helper()
	done := make(chan bool, 1)
	go func() { done <- sc.Scan() && sc.Text() == "cancelled" }()
	if !recv(t, done, "the plugin to see the cancel") {
		t.Fatal("plugin ended without seeing a cancel frame")
	}
}

// TestLeaseLossCancelsPlugin runs the real plugin runner: each way of
// losing the lease must reach the plugin as a protocol cancel frame.
func TestLeaseLossCancelsPlugin(t *testing.T) {
	cases := map[string]func(t *testing.T, c *gateConn){
		"gate cancel": func(t *testing.T, c *gateConn) {
			if err := c.Send(wire.Envelope{Type: wire.TypeCancel, Cancel: &wire.Cancel{JobID: "j_1", AttemptID: "a_1", Reason: wire.CancelExpired}}); err != nil {
				t.Fatal(err)
			}
		},
		"heartbeat rejected": func(t *testing.T, c *gateConn) {
			c.reply(t, c.nextOf(t, wire.TypeHeartbeat).Seq, false)
		},
		"connection dropped": func(t *testing.T, c *gateConn) { close(c.quit) },
	}
	for name, lose := range cases {
		t.Run(name, func(t *testing.T) {
			g := newFakeGate(t)
			c, ln := pluginConfig(t)
			c.GateURL, c.Concurrency, c.HeartbeatInterval = g.url(), 1, 20*time.Millisecond
			obs, ev := events()
			startWorker(t, Options{Config: c, Observe: obs,
				Executors: map[wire.Kind]Executor{wire.KindText: newTestExecutor(t, c)}})
			gc := g.accept()
			l := leaseFor(t, testPolicy("block"), "x")
			gc.lease(t, wire.Envelope{Type: wire.TypeLease, Lease: l})
			sc := acceptPlugin(t, ln)
			lose(t, gc)
			expectCancelled(t, sc)
			waitEvent(t, ev, EventLeaseLost)
		})
	}
}

// TestSpawnFailureCause: a plugin whose start the system refuses fails
// plugin_spawn_failed with the refused step and errno as the Worker-local
// cause (logged with the failure), which names no path.
func TestSpawnFailureCause(t *testing.T) {
	c, _ := pluginConfig(t)
	exe := filepath.Join(t.TempDir(), "gone-plugin")
	b, err := os.ReadFile(testBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c.Plugins = append(c.Plugins, Plugin{ID: "gone", Argv: []string{exe, pluginArg, "upper"}})
	if _, err := CheckHost(c, envWith(map[string]string{"FORGE_WORKER_TOKEN": testToken})); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	r := newTestExecutor(t, c).Execute(context.Background(), &Attempt{Lease: leaseFor(t, testPolicy("gone"), "x")})
	if r.Succeeded || r.Code != CodePluginSpawnFailed {
		t.Fatalf("report %+v, want %s", r, CodePluginSpawnFailed)
	}
	if !strings.Contains(r.Cause, "no such file or directory") || strings.Contains(r.Cause, exe) {
		t.Errorf("cause %q, want the errno and no path", r.Cause)
	}
}

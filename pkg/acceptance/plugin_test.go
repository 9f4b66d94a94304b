package acceptance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func scenarioPlugin(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "acceptance", "scenario-plugin.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPluginsWrittenByOthers runs an independently written Python plugin
// through a real Gate and Worker: correct answers at the exact limits
// succeed, and each subtly broken answer fails every attempt with the right
// retryable code until max_attempts_exceeded, without plugin output or
// stderr leaking anywhere.
func TestPluginsWrittenByOthers(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{maxAttempts: 2, retryBase: "50ms", pluginTimeout: "2s",
		workers: []gateWorker{{id: "worker-1", concurrency: 4}}})
	w := g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})

	type want struct {
		status, result, attemptCode string
	}
	cases := map[string]want{
		"ok hello " + marker:    {"succeeded", "HELLO " + strings.ToUpper(marker), ""},
		"exact-output":          {"succeeded", strings.Repeat("x", 65536), ""},
		"too-many-progress":     {"failed", "", "plugin_protocol_violation"},
		"big-output":            {"failed", "", "plugin_protocol_violation"},
		"extra-field":           {"failed", "", "plugin_protocol_violation"},
		"non-compact":           {"failed", "", "plugin_protocol_violation"},
		"crlf":                  {"failed", "", "plugin_protocol_violation"},
		"no-lf":                 {"failed", "", "plugin_protocol_violation"},
		"exit1":                 {"failed", "", "plugin_protocol_violation"},
		"write-after":           {"failed", "", "plugin_protocol_violation"},
		"linger":                {"failed", "", "plugin_protocol_violation"},
		"wrong-id":              {"failed", "", "plugin_protocol_violation"},
		"failure":               {"failed", "", "plugin_failed"},
		"die-mid-frame":         {"failed", "", "plugin_protocol_violation"},
		"bad-sequence":          {"failed", "", "plugin_protocol_violation"},
		"big-progress-text":     {"failed", "", "plugin_protocol_violation"},
		"unknown-stage":         {"failed", "", "plugin_protocol_violation"},
		"hang":                  {"failed", "", "plugin_timeout"},
		"unknown-scenario-word": {"failed", "", "plugin_failed"},
	}
	ids := map[string]string{}
	for input := range cases {
		ids[input] = g.submit(t, `{"input":"`+input+`"}`)
	}
	for input, wnt := range cases {
		j := g.waitTerminal(t, ids[input])
		a := g.aggregate(t, ids[input])
		if j.Status != wnt.status {
			t.Errorf("%s: status %s (%+v), want %s; attempts %+v", input, j.Status, j, wnt.status, a.Attempts)
			continue
		}
		if wnt.status == "succeeded" {
			if j.Result == nil || *j.Result != wnt.result || len(a.Attempts) != 1 {
				t.Errorf("%s: result %v, attempts %d", input, j.Result != nil, len(a.Attempts))
			}
			continue
		}
		if j.FailureCode != "max_attempts_exceeded" || j.Result != nil || len(a.Attempts) != 2 {
			t.Errorf("%s: job %+v with %d attempts, want max_attempts_exceeded after 2", input, j, len(a.Attempts))
		}
		for _, at := range a.Attempts {
			if at.Status != "failed" || at.FailureCode != wnt.attemptCode || at.Disposition != "retryable" {
				t.Errorf("%s: attempt %+v, want failed %s retryable", input, at, wnt.attemptCode)
			}
		}
		c := wnt.attemptCode
		want := "submitted leased/1 attempt_failed/1/" + c + " retry_scheduled/1 leased/2 attempt_failed/2/" + c + " failed/2/max_attempts_exceeded"
		if got := timeline(a.Events); got != want {
			t.Errorf("%s: timeline %q, want %q", input, got, want)
		}
	}
	// Nothing the plugin wrote reaches the Worker's or Gate's logs.
	for _, leak := range []string{"PLUGIN-STDERR-NOISE", marker, strings.ToUpper(marker), "PPPPPPPP", "xxxxxxxx"} {
		if strings.Contains(w.logs.String(), leak) {
			t.Errorf("worker log contains plugin output %q", leak)
		}
		if strings.Contains(g.logText(), leak) {
			t.Errorf("gate log contains plugin output %q", leak)
		}
	}
	g.assertNoSecrets(t)
}

// alive reports whether pid names a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone waits (bounded) until none of pids is alive and reports the
// ones still alive at the bound.
func waitGone(pids []int, bound time.Duration) []int {
	guard := time.Now().Add(bound)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(guard) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func killAll(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// TestPluginDescendantsAreReaped: a sandboxed plugin that leaves an
// ordinary and a setsid child behind after a successful result, or a
// background child that inherits its stdout, still succeeds and leaves
// nothing running. The test finds the children (and so the plugin) in
// /proc while the plugin waits for its flag, then lets it answer.
func TestPluginDescendantsAreReaped(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	flags := readableDir(t)
	g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}, readPaths: []string{flags}})
	for word, c := range map[string]struct {
		result   string
		children int
	}{"children": {"CHILDREN", 2}, "daemon": {"DAEMON", 1}} {
		m, flag := newMarker(t), filepath.Join(flags, word)
		id := g.submit(t, `{"input":"`+word+` `+m+` `+flag+`"}`)
		pids := waitMarked(t, m, c.children)
		t.Cleanup(func() { killAll(pids) })
		if len(pids) != c.children+1 {
			t.Fatalf("%s: processes %v, want %d children of one plugin", word, pids, c.children)
		}
		raise(t, flag)
		j := g.waitTerminal(t, id)
		if j.Status != "succeeded" || *j.Result != c.result {
			t.Fatalf("%s: job %+v", word, j)
		}
		if left := waitGone(pids, 30*time.Second); len(left) != 0 {
			t.Fatalf("%s: plugin processes %v outlived the operation", word, left)
		}
	}
}

// TestPluginEnvironmentCarriesNoSecrets: the plugin sees the policy's
// allowlisted variables only: neither the Worker's token nor anything
// else from the Worker's environment.
func TestPluginEnvironmentCarriesNoSecrets(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{})
	g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}, env: []string{"WORKER_ONLY_VAR=" + marker}})
	j := g.waitTerminal(t, g.submit(t, `{"input":"env"}`))
	if j.Status != "succeeded" || j.Result == nil {
		t.Fatalf("job %+v", j)
	}
	env := *j.Result
	if !strings.Contains(env, "PATH") {
		t.Fatalf("PATH (allowlisted) missing: %q", env)
	}
	for _, bad := range []string{"ACC_WORKER_TOKEN", g.workers[0].token, "WORKER_ONLY_VAR", marker} {
		if strings.Contains(env, bad) {
			t.Fatalf("plugin environment contains %q", bad)
		}
	}
}

// timeline renders events as "type[/attempt[/code]]" words.
func timeline(events []apiEvent) string {
	var w []string
	for _, e := range events {
		s := e.Type
		if e.Attempt != 0 {
			s += "/" + strconv.Itoa(e.Attempt)
		}
		if e.Code != "" {
			s += "/" + e.Code
		}
		w = append(w, s)
	}
	return strings.Join(w, " ")
}

package acceptance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bashPlugin is a protocol-correct v1 text plugin in bash: slow to start,
// noisy on stderr, minimal capabilities.
const bashPlugin = `#!/usr/bin/env bash
sleep 1
for i in $(seq 1 200); do echo "bash plugin noise $i BASHNOISE" >&2; done
IFS= read -r init
id=$(printf '%s' "$init" | sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p')
printf '{"version":"v1","id":"%s","type":"initialized","capabilities":["text"]}\n' "$id"
IFS= read -r ex
printf '{"version":"v1","id":"%s","type":"result","output":"bash says hi"}\n' "$id"
cat >/dev/null
`

// TestPluginExecutablesOfOtherShapes runs one Gate and Worker per plugin
// executable: a correct bash plugin succeeds; executables that break the
// protocol before execute, hang, or cannot start fail each attempt with
// the documented retryable code.
func TestPluginExecutablesOfOtherShapes(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		script string
		mode   os.FileMode
		status string
		code   string
	}{
		"bash ok":        {bashPlugin, 0o755, "succeeded", ""},
		"silent exit":    {"#!/bin/sh\nexit 0\n", 0o755, "failed", "plugin_protocol_violation"},
		"garbage":        {"#!/bin/sh\necho hello\ncat >/dev/null\n", 0o755, "failed", "plugin_protocol_violation"},
		"exit 3 at once": {"#!/bin/sh\nexit 3\n", 0o755, "failed", "plugin_protocol_violation"},
		"init hang":      {"#!/bin/sh\nexec sleep 60\n", 0o755, "failed", "plugin_timeout"},
		"not executable": {bashPlugin, 0o644, "failed", "plugin_spawn_failed"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "plugin")
			must(t, os.WriteFile(p, []byte(c.script), 0o755))
			g := newGate(t, gateOpts{maxAttempts: 2, retryBase: "50ms", pluginTimeout: "3s"})
			w := g.startWorker(t, workerOpts{plugins: map[string]string{"reference": p}})
			must(t, os.Chmod(p, c.mode)) // after the Worker validated its config
			id := g.submit(t, `{"input":"hello"}`)
			j := g.waitTerminal(t, id)
			a := g.aggregate(t, id)
			if j.Status != c.status {
				t.Fatalf("job %+v, attempts %+v", j, a.Attempts)
			}
			if c.status == "succeeded" {
				if *j.Result != "bash says hi" {
					t.Fatalf("result %q", *j.Result)
				}
			} else {
				if j.FailureCode != "max_attempts_exceeded" || len(a.Attempts) != 2 {
					t.Fatalf("job %+v with %d attempts", j, len(a.Attempts))
				}
				for _, at := range a.Attempts {
					if at.FailureCode != c.code || at.Disposition != "retryable" {
						t.Fatalf("attempt %+v, want %s", at, c.code)
					}
				}
			}
			if strings.Contains(w.logs.String(), "BASHNOISE") || strings.Contains(w.logs.String(), "hello") {
				t.Fatalf("plugin output in the worker log")
			}
		})
	}
}

// TestPluginOutputBudget: stderr counts toward the plugin output budget:
// a plugin that floods stderr fails with plugin_output_limit.
func TestPluginOutputBudget(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{maxAttempts: 1})
	g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	id := g.submit(t, `{"input":"stderr-flood"}`)
	j := g.waitTerminal(t, id)
	a := g.aggregate(t, id)
	if j.Status != "failed" || len(a.Attempts) != 1 || a.Attempts[0].FailureCode != "plugin_output_limit" {
		t.Fatalf("job %+v attempts %+v", j, a.Attempts)
	}
	// A policy budget below what a correct plugin prints.
	g2 := newGate(t, gateOpts{maxAttempts: 1, outputBytes: 4096})
	g2.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	id = g2.submit(t, `{"input":"exact-output"}`)
	j = g2.waitTerminal(t, id)
	a = g2.aggregate(t, id)
	if j.Status != "failed" || len(a.Attempts) != 1 || a.Attempts[0].FailureCode != "plugin_output_limit" {
		t.Fatalf("job %+v attempts %+v", j, a.Attempts)
	}
}

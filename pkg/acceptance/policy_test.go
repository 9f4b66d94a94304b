package acceptance

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestTerminalWorkerRefusals: a lease the Worker must refuse before running
// anything ends the job at once (terminal, one attempt) with the
// documented code, and the plugin never runs.
func TestTerminalWorkerRefusals(t *testing.T) {
	t.Parallel()
	t.Run("plugin identity mismatch", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		p := filepath.Join(dir, "plugin")
		must(t, os.WriteFile(p, []byte(bashPlugin), 0o755))
		sum := sha256.Sum256([]byte(bashPlugin))
		g := newGate(t, gateOpts{})
		g.startWorker(t, workerOpts{plugins: map[string]string{"reference": p}, pins: map[string]string{"reference": hex.EncodeToString(sum[:])}})
		// The pinned plugin runs.
		if j := g.waitTerminal(t, g.submit(t, `{"input":"a"}`)); j.Status != "succeeded" {
			t.Fatalf("pinned plugin: %+v", j)
		}
		// Replaced after the Worker started: refused, terminal.
		must(t, os.WriteFile(p, []byte(bashPlugin+"# changed\n"), 0o755))
		id := g.submit(t, `{"input":"b"}`)
		j := g.waitTerminal(t, id)
		a := g.aggregate(t, id)
		if j.Status != "failed" || j.FailureCode != "plugin_identity_mismatch" || len(a.Attempts) != 1 || a.Attempts[0].Disposition != "terminal" {
			t.Fatalf("job %+v attempts %+v", j, a.Attempts)
		}
	})
	for name, c := range map[string]struct {
		opts gateOpts
		code string
	}{
		"environment not allowed": {gateOpts{environment: `["PATH","HOME"]`}, "environment_not_allowed"},
		"policy exceeds ceiling":  {gateOpts{pluginTimeout: "16m"}, "policy_exceeds_ceiling"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newGate(t, c.opts)
			pidFile := filepath.Join(t.TempDir(), "ran")
			g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
			id := g.submit(t, `{"input":"children `+pidFile+`"}`)
			j := g.waitTerminal(t, id)
			a := g.aggregate(t, id)
			if j.Status != "failed" || j.FailureCode != c.code || len(a.Attempts) != 1 || a.Attempts[0].Disposition != "terminal" {
				t.Fatalf("job %+v attempts %+v", j, a.Attempts)
			}
			if _, err := os.Stat(pidFile); err == nil {
				t.Fatal("the plugin ran")
			}
		})
	}
}

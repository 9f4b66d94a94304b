package acceptance

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
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
			flags := readableDir(t)
			g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}, readPaths: []string{flags}})
			// Had the plugin run, its two "sleep <marker>" children would
			// live until the flag (never raised) or the Worker stopped
			// them: watch /proc for them from before the submission until
			// the job is terminal.
			m := newMarker(t)
			seen := make(chan int, 1)
			stop := make(chan struct{})
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				for {
					if n := len(marked(m)); n > 0 {
						seen <- n
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			id := g.submit(t, `{"input":"children `+m+` `+filepath.Join(flags, "never")+`"}`)
			t.Cleanup(func() {
				for pid := range marked(m) {
					killAll([]int{pid})
				}
			})
			j := g.waitJob(t, id, "terminal or run", func(j apiJob) bool {
				return j.Status == "succeeded" || j.Status == "failed" || len(seen) > 0
			})
			close(stop)
			<-watched
			select {
			case n := <-seen:
				t.Fatalf("the plugin ran: %d of its children seen", n)
			default:
			}
			a := g.aggregate(t, id)
			if j.Status != "failed" || j.FailureCode != c.code || len(a.Attempts) != 1 || a.Attempts[0].Disposition != "terminal" {
				t.Fatalf("job %+v attempts %+v", j, a.Attempts)
			}
		})
	}
}

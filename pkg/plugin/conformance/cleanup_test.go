package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// leftover runs the reference plugin behind testdata/leftover-plugin.py,
// which first starts a `sleep 300` in a new session and records its pid in
// a file; it returns the command and a function listing the recorded
// descendants still running. Any still running when the test ends are
// killed.
func leftover(t *testing.T, mode string) ([]string, func() []int) {
	t.Helper()
	script, err := filepath.Abs("../../../testdata/conformance/leftover-plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "pids")
	alive := func() []int {
		data, err := os.ReadFile(pidfile)
		if err != nil {
			t.Fatalf("no descendant was recorded: %v", err)
		}
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("bad pid record %q", f)
			}
			// A zombie or a recycled pid has another command line.
			if cmd, err := os.ReadFile("/proc/" + f + "/cmdline"); err == nil && string(cmd) == "sleep\x00300\x00" {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	t.Cleanup(func() {
		if _, err := os.Stat(pidfile); err != nil {
			return
		}
		for _, pid := range alive() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return []string{script, mode, pidfile, refPlugin(t)}, alive
}

// TestSetsidDescendantsAreCleanedUp runs every scenario, the direct ones
// and the host-runner session alike, under the Worker's subreaper wrapper:
// each leaves a setsid descendant, and none may outlive its scenario.
func TestSetsidDescendantsAreCleanedUp(t *testing.T) {
	cmd, alive := leftover(t, "detached")
	sum, got := runSuite(t, Config{Command: cmd, Operation: plugin.OpText, Reaper: selfReaper(t)})
	requireAllPass(t, plugin.OpText, sum, got)
	if pids := alive(); len(pids) > 0 {
		t.Errorf("%d setsid descendants outlived their scenarios", len(pids))
	}
}

// TestHeldStdoutIsSweptLikeTheWorker: a setsid descendant that holds
// stdout open is swept by the wrapper when the plugin exits, so it fails
// no scenario of a plugin that itself behaves, as in the Worker. One
// scenario of each expectation runs (a plugin that fails them hangs until
// the bound, so the bound is short).
func TestHeldStdoutIsSweptLikeTheWorker(t *testing.T) {
	cmd, alive := leftover(t, "stdout")
	re := regexp.MustCompile(`^(session-valid|session-host-runner|session-cancel|framing-empty-stdin|version-v2|` +
		`id-mismatch-execute|order-second-execute)$`)
	sum, got := runSuite(t, Config{Command: cmd, Operation: plugin.OpText, Match: re.MatchString,
		Timeout: 3 * time.Second, Reaper: selfReaper(t)})
	if sum.Total != 7 {
		t.Errorf("ran %d scenarios, want 7", sum.Total)
	}
	for _, r := range got {
		if !r.Passed() {
			t.Errorf("%s", r.Line())
		}
	}
	if pids := alive(); len(pids) > 0 {
		t.Errorf("%d setsid descendants outlived their scenarios", len(pids))
	}
}

// TestHeldStdoutVerdictMatchesWorkerWithoutReaper: without the wrapper
// only the process group is cleaned up, so a setsid descendant holding
// stdout keeps it open past the exit window; the direct session and the
// Worker's runner must then agree that the plugin fails.
func TestHeldStdoutVerdictMatchesWorkerWithoutReaper(t *testing.T) {
	cmd, _ := leftover(t, "stdout")
	re := regexp.MustCompile(`^session-(valid|host-runner)$`)
	sum, got := runSuite(t, Config{Command: cmd, Operation: plugin.OpText, Match: re.MatchString})
	if sum.Total != 2 || sum.Failed != 2 {
		t.Fatalf("summary %+v, want both sessions to fail", sum)
	}
	if r := got["session-valid"]; !strings.Contains(r.Err.Error(), "within 250 ms") {
		t.Errorf("session-valid: %s", r.Line())
	}
	if r := got["session-host-runner"]; !strings.Contains(r.Err.Error(), "host runner: plugin protocol violation") {
		t.Errorf("session-host-runner: %s", r.Line())
	}
}

// TestCancelWindow: the terminal frame and the exit must follow the cancel
// within the 250 ms the Worker allows. A plugin that answers at once
// passes; one that answers after two seconds fails, with or without the
// wrapper.
func TestCancelWindow(t *testing.T) {
	script, err := filepath.Abs("../../../testdata/conformance/cancel-plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^session-cancel$`)
	for _, reaper := range []*supervise.ReaperPool{nil, selfReaper(t)} {
		for _, mode := range []string{"prompt", "slow"} {
			sum, got := runSuite(t, Config{Command: []string{script, mode}, Operation: plugin.OpText, Match: re.MatchString, Reaper: reaper})
			r, ok := got["session-cancel"]
			if sum.Total != 1 || !ok {
				t.Fatalf("%s: ran %d scenarios, want session-cancel", mode, sum.Total)
			}
			switch {
			case mode == "prompt" && !r.Passed():
				t.Errorf("prompt answer (reaper %t) failed: %s", reaper != nil, r.Line())
			case mode == "slow" && r.Passed():
				t.Errorf("answer two seconds after the cancel (reaper %t) passed", reaper != nil)
			case mode == "slow" && r.Err != errCancelLate:
				t.Errorf("slow answer (reaper %t): %s, want the cancel window reason", reaper != nil, r.Line())
			}
		}
	}
	if want := "within the 250 ms the Worker allows after its cancel"; !strings.Contains(errCancelLate.Error(), want) {
		t.Errorf("cancel window reason %q does not name the window", errCancelLate)
	}
}

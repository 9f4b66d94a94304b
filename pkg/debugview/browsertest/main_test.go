package browsertest

import (
	"os"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// TestMain lets the test binary serve as the reaper of the in-process
// Worker (startRealWorker), which starts its sandboxed plugin through one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

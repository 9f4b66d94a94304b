package host_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// bins holds binaries TestMain builds once for the whole test binary.
type bins struct {
	refPlugin string // cmd/forge-ref-plugin
	wrapper   string // testdata/host-demo: a small binary with reaper mode
	fake      string // testdata/fakeplugin: scripted plugin scenarios
	// reapers is a pool of wrapper's reapers, shared by every test.
	reapers *supervise.ReaperPool
}

// built is set once by TestMain before any test runs and only read after.
var built bins

// TestMain dispatches the reaper mode the test binary also serves, then
// builds the binaries the tests and benchmarks need (without -race, so
// their timing does not depend on how the tests run).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case supervise.ReaperArg:
			os.Exit(supervise.ReaperMain(os.Args[2:]))
		}
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "forge-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	built = bins{refPlugin: filepath.Join(dir, "forge-ref-plugin"), wrapper: filepath.Join(dir, "forge-host-demo"), fake: filepath.Join(dir, "fakeplugin")}
	for out, pkg := range map[string]string{
		built.refPlugin: "github.com/0k-lab/agent-forge/cmd/forge-ref-plugin",
		built.wrapper:   "../../../testdata/host-demo",
		built.fake:      "../../../testdata/fakeplugin",
	} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build test binaries:", err)
			return 1
		}
	}
	built.reapers = supervise.NewReaperPool(built.wrapper)
	defer built.reapers.Close()
	return m.Run()
}

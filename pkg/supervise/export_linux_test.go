package supervise

import (
	"fmt"
	"os"
	"runtime"
)

// SweepReportEnv names, in a wrapped child's environment, a file where the
// test binary's reaper mode writes what its sweep did.
const SweepReportEnv = "SUPERVISE_TEST_SWEEP_REPORT"

// ReaperTestMain is ReaperMain for the test binary: it also writes the
// sweep's report ("fast=… term=… kill=… timedout=… procs=…", the last
// being the reaper's GOMAXPROCS) to the file that SweepReportEnv names,
// when it names one.
func ReaperTestMain(args []string) int {
	status, rep := reap(args)
	if path := os.Getenv(SweepReportEnv); path != "" {
		line := fmt.Sprintf("fast=%t term=%d kill=%d timedout=%t procs=%d\n", rep.fast, rep.term, rep.kill, rep.timedOut, runtime.GOMAXPROCS(0))
		if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
			return reaperUsage
		}
	}
	return status
}

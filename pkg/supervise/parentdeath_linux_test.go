package supervise_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A caller that dies by SIGKILL while its program runs (a crashed Worker
// mid-plugin) leaves nothing behind: the reaper's parent-death signal stops
// the program and sweeps its ordinary and setsid descendants.
func TestReaperStopsProgramWhenCallerDies(t *testing.T) {
	cmd := exec.Command(self(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanHelperEnv+"="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %v", err)
	}
	var procs []leftover
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid line %q", line)
		}
		procs = append(procs, leftover{pid, identity(pid)})
	}
	if len(procs) != 4 {
		t.Fatalf("pid line %q", line)
	}
	for _, l := range procs {
		if l.id == "" {
			t.Fatalf("process %d not running before the caller died", l.pid)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	// Liveness bound only: the reaper's own cleanup is bounded far below.
	guard := time.Now().Add(20 * time.Second)
	for {
		left := 0
		for _, l := range procs {
			if identity(l.pid) == l.id {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(guard) {
			assertGone(t, procs)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

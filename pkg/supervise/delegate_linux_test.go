package supervise_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/cgrouptest"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// delegateHelperEnv makes the test binary do what a Worker does at
// startup, supervise.DelegatedCgroups, and print its own cgroup after
// (or the error).
const delegateHelperEnv = "FORGE_SUPERVISE_DELEGATE_HELPER"

func delegateHelper() int {
	cg, err := supervise.DelegatedCgroups()
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		return 1
	}
	defer cg.Close()
	own, _ := supervise.OwnCgroup()
	os.Stdout.WriteString(own + "\n")
	return 0
}

// startIn starts a sleeper directly in the cgroup dir.
func startIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := exec.Command("/bin/sleep", "1000")
	c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// A process started in a cgroup of its own moves itself into its leaf,
// and empties and removes the invocation cgroup a predecessor that no
// longer runs left (a sleeper in it dies), but not one whose maker runs.
func TestDelegatedCgroupsSweepsDeadMakersOnly(t *testing.T) {
	dir := cgrouptest.Own(t)
	dead := filepath.Join(dir, "sbx-"+strconv.Itoa(1<<22+1)+"-1") // above PID_MAX_LIMIT: never running
	live := filepath.Join(dir, "sbx-"+strconv.Itoa(os.Getpid())+"-1")
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	orphan, kept := startIn(t, dead), startIn(t, live)
	c := exec.Command(self(t))
	c.Env = []string{delegateHelperEnv + "=1"}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	out, err := c.Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "/supervisor") {
		t.Fatalf("helper: %q %v", out, err)
	}
	if st, err := orphan.Process.Wait(); err != nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the dead maker's leftover: %v %v, want killed", st, err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Error("the dead maker's cgroup is still there")
	}
	if err := kept.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the running maker's leftover was killed: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the running maker's cgroup is gone: %v", err)
	}
}

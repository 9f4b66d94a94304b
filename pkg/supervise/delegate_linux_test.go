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
	dead := filepath.Join(dir, "sbx-"+strconv.Itoa(1<<22)+"-1-1") // PID_MAX_LIMIT: never running
	live := filepath.Join(dir, "sbx-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(supervise.SelfStart(), 10)+"-1")
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

// The leftover sweep keys an invocation cgroup on its maker's pid and
// start time: one named after this very pid but another start time (a
// predecessor that had the same pid, as a Worker that is PID 1 of a
// container has after a restart) is emptied and removed, and so is one
// of the older form (no start time) that carries this pid; one of a
// running process under its true start time is kept, under another
// start time it is not. Before, every name with a running pid was kept,
// this process's own included.
func TestSweepLeftoversSamePid(t *testing.T) {
	dir := cgrouptest.Own(t)
	pid, start := strconv.Itoa(os.Getpid()), supervise.SelfStart()
	parent, ok := procStart(os.Getppid())
	if !ok {
		t.Fatal("cannot read the parent's start time")
	}
	names := map[string]bool{ // kept?
		"sbx-" + pid + "-" + strconv.FormatUint(start+1, 10) + "-1": false,
		"sbx-" + pid + "-2": false,
		"sbx-" + pid + "-" + strconv.FormatUint(start, 10) + "-3":                           true,
		"sbx-" + strconv.Itoa(os.Getppid()) + "-" + strconv.FormatUint(parent, 10) + "-4":   true,
		"sbx-" + strconv.Itoa(os.Getppid()) + "-" + strconv.FormatUint(parent+7, 10) + "-5": false,
		"sbx-" + strconv.Itoa(os.Getppid()) + "-6":                                          true,
	}
	procs := map[string]*exec.Cmd{}
	for name := range names {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		procs[name] = startIn(t, filepath.Join(dir, name))
	}
	if err := supervise.SweepLeftovers(dir); err != nil {
		t.Fatal(err)
	}
	for name, kept := range names {
		_, err := os.Stat(filepath.Join(dir, name))
		// Killed by the sweep, it is a zombie until the test reaps it.
		alive := procState(procs[name].Process.Pid) != "Z"
		if kept != (err == nil) || kept != alive {
			t.Errorf("%s: cgroup there %v, process alive %v; want kept %v", name, err == nil, alive, kept)
		}
	}
}

// procState is field 3 of /proc/<pid>/stat ("" when it cannot be read).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return ""
	}
	if f := strings.Fields(string(b[i+1:])); len(f) > 0 {
		return f[0]
	}
	return ""
}

// procStart is field 22 of /proc/<pid>/stat.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}

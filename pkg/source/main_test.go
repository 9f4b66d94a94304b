package source

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// killedHelperEnv makes the test binary act as a Gate that prepares a
// repository with a git that never ends, until it is killed.
const killedHelperEnv = "FORGE_SOURCE_KILLED_GATE_HELPER"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	if dir := os.Getenv(killedHelperEnv); dir != "" {
		os.Exit(killedGateHelper(dir))
	}
	os.Exit(m.Run())
}

func killedGateHelper(dir string) int {
	self, err := supervise.Self()
	if err != nil {
		return 1
	}
	p, err := New(filepath.Join(dir, "public"), filepath.Join(dir, "git"), nil, supervise.NewReaperPool(self))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	_, err = p.Prepare(context.Background(), Repository{ID: "app", URL: testURL, Branch: "main", Timeout: time.Hour}, "")
	fmt.Println(err)
	return 1
}

// A Gate killed (SIGKILL) while its git runs leaves no git behind: an
// orphaned fetch would run on, unbounded, against a slow upstream and
// could later move the branch back under the next Gate.
func TestKilledGateLeavesNoGit(t *testing.T) {
	dir := realDir(t)
	if err := os.Mkdir(filepath.Join(dir, "public"), 0o700); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "git.pid")
	script := "#!/bin/sh\necho $$ >'" + pidFile + ".tmp'\nmv '" + pidFile + ".tmp' '" + pidFile + "'\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killedHelperEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pid int
	for guard := time.Now().Add(20 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(guard) {
			t.Fatal("the helper's git never started")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	// Liveness bound only: the reaper stops its child well within it.
	for guard := time.Now().Add(20 * time.Second); running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(guard) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the killed Gate's git still runs")
		}
	}
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

package supervise_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/cgrouptest"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// killAll kills, for a bounded time, every process whose command line
// holds marker: a test that fails must not leave hoppers behind.
func killAll(marker string) {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		entries, _ := os.ReadDir("/proc")
		found := false
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(marker)) {
				syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
	}
}

// hopperProgram starts K chains of hoppers, lets them run for a moment,
// and exits. Each hopper forks its successor, which makes itself a
// session of its own, and exits at once: a chain is never the same
// process for long, every new one is reparented to the reaper, and their
// zombies come faster than a sweep reaps them.
// Every hopper appends a byte to the file named by argv[2]: a chain that
// lives on makes it grow.
const hopperProgram = `import os, sys, time
beat = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
def chain():
    while True:
        if os.fork():
            os._exit(0)
        os.setsid()
        os.write(beat, b"x")
for _ in range(int(sys.argv[1])):
    if os.fork() == 0:
        os.setsid()
        chain()
time.sleep(0.3)
`

// A contained sandboxed program that leaves 64 chains of setsid hoppers
// leaves nothing alive once Wait returns: its
// cgroup's kill takes every process in it at once. The same program run
// uncontained beats the reaper's sweep (the proof that this test fails
// on the sweep alone is in docs/sandbox.md).
func TestContainedHoppersAllDie(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	cg := cgrouptest.Subtree(t)
	pl := reapers(t)
	pl.Contain(cg)
	ws := t.TempDir()
	hop := filepath.Join(ws, "hop.py")
	if err := os.WriteFile(hop, []byte(hopperProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killAll(hop) })
	beat := filepath.Join(ws, "beat")
	c := supervise.Command{Path: "/usr/bin/python3", Args: []string{hop, "64", beat}, OutputLimit: 1 << 20,
		Reaper: pl, Sandbox: systemPolicy(ws)}
	p, err := supervise.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	exit, err := p.Wait()
	if err != nil || !exit.Success() {
		t.Fatalf("leader: %+v %v", exit, err)
	}
	if !p.StdoutHeld() {
		t.Error("StdoutHeld is false, want true: the hoppers held stdout after the program ended")
	}
	size := func() int64 {
		st, err := os.Stat(beat)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	before := size()
	if before == 0 {
		t.Fatal("no hopper ever ran")
	}
	time.Sleep(200 * time.Millisecond)
	if after := size(); after != before {
		t.Fatalf("hoppers ran on after Wait: %d more hops in 200ms", after-before)
	}
	if entries, _ := os.ReadDir(cg.Dir()); len(entries) > 0 {
		for _, e := range entries {
			if e.IsDir() {
				t.Errorf("cgroup %s left behind", e.Name())
			}
		}
	}
}

// A contained program that leaves nothing behind holds no stdout, and its
// reaper serves the next one; a start that fails leaves no cgroup.
func TestContainedCleanProgram(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	cg := cgrouptest.Subtree(t)
	pl := reapers(t)
	pl.Contain(cg)
	ws := t.TempDir()
	for i := 0; i < 2; i++ {
		c := shell(t, `cat /proc/self/cgroup`)
		c.Reaper, c.Sandbox = pl, systemPolicy(ws)
		p, err := supervise.Start(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		exit, err := p.Wait()
		p.Close()
		if err != nil || !exit.Success() {
			t.Fatalf("run %d: %+v %v", i, exit, err)
		}
		if !strings.Contains(string(out), "/sbx-") {
			t.Errorf("run %d: the program ran in %q, not a cgroup of its own", i, out)
		}
		if p.StdoutHeld() {
			t.Errorf("run %d: StdoutHeld, want not", i)
		}
	}
	if b, err := os.ReadFile(filepath.Join(cg.Dir(), "cgroup.controllers")); err != nil || strings.Join(cg.Controllers(), " ") != strings.Join(strings.Fields(string(b)), " ") {
		t.Errorf("Controllers %q, cgroup.controllers %q %v", cg.Controllers(), b, err)
	}
	if n := supervise.IdleGuarded(pl); n != 1 {
		t.Errorf("%d idle guarded reapers, want 1 (the reaper served again)", n)
	}
	c := shell(t, "true")
	c.Path = filepath.Join(ws, "missing")
	c.Reaper, c.Sandbox = pl, systemPolicy(ws)
	var se *supervise.StartError
	if _, err := supervise.Start(context.Background(), c); !errors.As(err, &se) {
		t.Fatalf("missing program: %v, want a StartError", err)
	} else if se.Reason != "open program" || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing program: %v, want the step open program with ENOENT", err)
	}
	entries, _ := os.ReadDir(cg.Dir())
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("cgroup %s left behind", e.Name())
		}
	}
}

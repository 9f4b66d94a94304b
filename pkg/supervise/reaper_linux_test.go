package supervise_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// identity is a process's start time, or "" when it no longer runs (gone
// or a zombie).
func identity(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 20 || string(f[0]) == "Z" {
		return ""
	}
	return string(f[19])
}

func sessionOf(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return string(f[3])
}

// leaverScript writes the two pids on its first line.
const leaverScript = `setsid sh -c 'echo $$ > "$0.s"; exec sleep 1000' "$D/p" &
sh -c 'echo $$ > "$0.o"; exec sleep 1000' "$D/p" &
while [ ! -s "$D/p.s" ] || [ ! -s "$D/p.o" ]; do :; done
echo "$(cat "$D/p.s") $(cat "$D/p.o")"
read x
exit "$CODE"`

type leftover struct {
	pid int
	id  string
}

func startLeaver(t *testing.T, ctx context.Context, reaper bool, code string) (*supervise.Process, []leftover) {
	t.Helper()
	c := shell(t, leaverScript)
	c.Env = append(c.Env, "D="+t.TempDir(), "CODE="+code)
	if reaper {
		c.Reaper = self(t)
	}
	p, _, line := startReady(t, ctx, c)
	var out []leftover
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid line %q", line)
		}
		id := identity(pid)
		if id == "" {
			t.Fatalf("descendant %d not running before cleanup", pid)
		}
		out = append(out, leftover{pid, id})
	}
	if len(out) != 2 {
		t.Fatalf("pid line %q", line)
	}
	if sessionOf(out[0].pid) == sessionOf(p.Pid()) {
		t.Fatal("setsid grandchild shares the session; the test would prove nothing")
	}
	return p, out
}

func assertGone(t *testing.T, procs []leftover) {
	t.Helper()
	for _, l := range procs {
		if identity(l.pid) == l.id {
			syscall.Kill(l.pid, syscall.SIGKILL)
			t.Errorf("descendant %d still alive after the invocation", l.pid)
		}
	}
}

func TestReaperCleansUpAfterSuccess(t *testing.T) {
	p, left := startLeaver(t, context.Background(), true, "0")
	p.Stdin().Close()
	exit, err := p.Wait()
	if err != nil || !exit.Success() {
		t.Fatalf("exit = %+v, %v", exit, err)
	}
	assertGone(t, left)
}

func TestReaperCleansUpAfterFailureAndPassesStatus(t *testing.T) {
	p, left := startLeaver(t, context.Background(), true, "7")
	p.Stdin().Close()
	exit, err := p.Wait()
	if err != nil || exit.Code != 7 {
		t.Fatalf("exit = %+v, %v; want code 7", exit, err)
	}
	assertGone(t, left)
}

func TestReaperCleansUpAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, left := startLeaver(t, ctx, true, "0")
	cancel()
	exit, err := p.Wait()
	if err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
	if exit.Code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit = %+v, want the forwarded SIGTERM as 143", exit)
	}
	assertGone(t, left)
}

// Without the reaper a setsid grandchild escapes group cleanup: this is
// what the reaper exists for, and shows the tests above can fail.
func TestWithoutReaperSetsidEscapes(t *testing.T) {
	p, left := startLeaver(t, context.Background(), false, "0")
	p.Stdin().Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if identity(left[1].pid) == left[1].id {
		t.Error("ordinary child survived the group cleanup")
	}
	if identity(left[0].pid) != left[0].id {
		t.Fatal("setsid grandchild died without a reaper; the reaper tests prove nothing")
	}
	syscall.Kill(left[0].pid, syscall.SIGKILL)
}

func TestReaperEscalatesWhenProgramIgnoresTerm(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := shell(t, `trap '' TERM; echo ready; while :; do read x || exit 0; done`)
	c.Reaper = self(t)
	c.KillGrace = time.Hour // only the reaper's own escalation can end it
	p, _, _ := startReady(t, ctx, c)
	cancel()
	exit, _ := p.Wait()
	if exit.Code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit = %+v, want 137", exit)
	}
}

func TestReaperReportsExecFailure(t *testing.T) {
	script := t.TempDir() + "/plugin"
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := supervise.Run(context.Background(), supervise.Command{Path: script, Reaper: self(t), OutputLimit: 10}, nil)
	if err != nil || res.Exit.Code != 127 {
		t.Fatalf("exit = %+v, %v; want 127", res.Exit, err)
	}
}

func TestReaperMainRejectsMissingProgram(t *testing.T) {
	if got := supervise.ReaperMain(nil); got == 0 {
		t.Fatal("ReaperMain without a program returned 0")
	}
}

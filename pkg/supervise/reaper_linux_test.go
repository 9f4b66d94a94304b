package supervise_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
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
		c.Reaper = reapers(t)
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
	if exit.Signal != syscall.SIGTERM {
		t.Fatalf("exit = %+v, want the SIGTERM the reaper sent", exit)
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

// The caller's KillGrace escalation reaches a program that ignores
// SIGTERM through the reaper.
func TestReaperEscalatesWhenProgramIgnoresTerm(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := shell(t, `trap '' TERM; echo ready; while :; do read x || exit 0; done`)
	c.Reaper = reapers(t)
	c.KillGrace = 50 * time.Millisecond
	p, _, _ := startReady(t, ctx, c)
	cancel()
	exit, _ := p.Wait()
	if exit.Signal != syscall.SIGKILL {
		t.Fatalf("exit = %+v, want SIGKILL", exit)
	}
}

// A program the reaper cannot execute (bad interpreter) is a start error,
// as without a reaper, not the exit status of some process; the reaper
// stays in the pool for the next child.
func TestReaperReportsExecFailure(t *testing.T) {
	script := t.TempDir() + "/plugin"
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	pl := reapers(t)
	for _, reaper := range []*supervise.ReaperPool{nil, pl} {
		_, err := supervise.Run(context.Background(), supervise.Command{Path: script, Reaper: reaper, OutputLimit: 10}, nil)
		var se *supervise.StartError
		if !errors.As(err, &se) || se.Err != syscall.ENOENT {
			t.Fatalf("reaper %v: err = %v, want a *StartError with ENOENT", reaper != nil, err)
		}
	}
	if n := supervise.IdleReapers(pl); n != 1 {
		t.Fatalf("%d idle reapers after a failed exec, want 1", n)
	}
	res, err := supervise.Run(context.Background(), supervise.Command{Path: mustLook(t, "sh"), Args: []string{"-c", "exit 127"}, Reaper: pl, OutputLimit: 10}, nil)
	if err != nil || res.Exit.Code != 127 {
		t.Fatalf("exit = %+v, %v; want a plain exit 127", res.Exit, err)
	}
}

func TestReaperMainRejectsArgumentsAndMissingSocket(t *testing.T) {
	if got := supervise.ReaperMain([]string{"/bin/true"}); got == 0 {
		t.Fatal("ReaperMain with arguments returned 0")
	}
	cmd := exec.Command(self(t), supervise.ReaperArg) // no fd 3
	if err := cmd.Run(); err == nil {
		t.Fatal("reaper without its socket exited 0")
	}
}

// One reaper serves child after child: the pool grows to the number run
// at once and no further.
func TestReaperPoolReusesReapers(t *testing.T) {
	pl := reapers(t)
	var pids []int
	for i := 0; i < 3; i++ {
		c := shell(t, `read x; exit 0`)
		c.Reaper = pl
		p, err := supervise.Start(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, supervise.ReaperPid(p))
		p.Stdin().Close()
		if exit, err := p.Wait(); err != nil || !exit.Success() {
			t.Fatalf("exit = %+v, %v", exit, err)
		}
		p.Close()
	}
	if pids[0] != pids[1] || pids[1] != pids[2] {
		t.Fatalf("reaper pids %v, want one reaper reused", pids)
	}
	var ps []*supervise.Process
	for i := 0; i < 2; i++ {
		c := shell(t, `read x; exit 0`)
		c.Reaper = pl
		p, err := supervise.Start(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if supervise.ReaperPid(ps[0]) == supervise.ReaperPid(ps[1]) {
		t.Fatal("two children at once share a reaper")
	}
	for _, p := range ps {
		p.Stdin().Close()
		p.Wait()
		p.Close()
	}
	if n := supervise.IdleReapers(pl); n != 2 {
		t.Fatalf("%d idle reapers, want 2", n)
	}
}

// A reaper that died while idle is replaced at the next Start; one that
// dies while running a child takes the child with it, which is reported
// as killed.
func TestReaperPoolSurvivesDeadReapers(t *testing.T) {
	pl := reapers(t)
	c := shell(t, `echo ready; read x; exit 0`)
	c.Reaper = pl
	p, _, _ := startReady(t, context.Background(), c)
	reaper, child := supervise.ReaperPid(p), p.Pid()
	id := identity(child)
	syscall.Kill(reaper, syscall.SIGKILL)
	exit, _ := p.Wait()
	p.Close()
	if exit.Signal != syscall.SIGKILL {
		t.Fatalf("exit = %+v, want SIGKILL", exit)
	}
	// The parent-death signal is delivered as the reaper dies, but the
	// child's own exit can trail the report; liveness bound only.
	for guard := time.Now().Add(10 * time.Second); identity(child) == id && time.Now().Before(guard); {
		time.Sleep(time.Millisecond)
	}
	assertGone(t, []leftover{{child, id}})
	if n := supervise.IdleReapers(pl); n != 0 {
		t.Fatalf("a dead reaper went back to the pool (%d idle)", n)
	}
	// An idle reaper killed behind the pool's back.
	c = shell(t, `echo ready; read x; exit 4`)
	c.Reaper = pl
	p, _, _ = startReady(t, context.Background(), c)
	idle := supervise.ReaperPid(p)
	p.Stdin().Close()
	p.Wait()
	p.Close()
	syscall.Kill(idle, syscall.SIGKILL)
	for guard := time.Now().Add(10 * time.Second); identity(idle) != "" && time.Now().Before(guard); {
		time.Sleep(time.Millisecond) // until the kernel has made it a zombie
	}
	c = shell(t, `exit 5`)
	c.Reaper = pl
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil || res.Exit.Code != 5 {
		t.Fatalf("exit = %+v, %v; want 5 from a fresh reaper", res.Exit, err)
	}
}

// parseSweep splits a sweep description (supervise.SweepOf) into its
// fields.
func parseSweep(t *testing.T, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("bad sweep report %q", line)
		}
		out[k] = v
	}
	if len(out) != 4 {
		t.Fatalf("bad sweep report %q", line)
	}
	return out
}

// With nothing left behind, the reaper reports straight after the program:
// no /proc scan, no signal, no grace period (the fast path).
func TestReaperFastPathWithoutDescendants(t *testing.T) {
	cases := map[string]string{
		"no child at all":         `exit 3`,
		"children already waited": `ls / >/dev/null; env >/dev/null; exit 3`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			c := shell(t, script)
			c.Reaper = reapers(t)
			p, err := supervise.Start(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			p.Stdin().Close()
			if exit, err := p.Wait(); err != nil || exit.Code != 3 {
				t.Fatalf("exit = %+v, %v; want code 3", exit, err)
			}
			p.Close()
			if got, want := supervise.SweepOf(p), "fast=true term=0 kill=0 timedout=false"; got != want {
				t.Fatalf("sweep = %q, want %q", got, want)
			}
		})
	}
}

// twoSessionsScript leaves two setsid children (outside the program's
// group, which the reaper kills as a whole first) and writes their pids.
const twoSessionsScript = `setsid sh -c 'echo $$ > "$0.a"; exec sleep 1000' "$D/p" &
setsid sh -c 'echo $$ > "$0.b"; exec sleep 1000' "$D/p" &
while [ ! -s "$D/p.a" ] || [ ! -s "$D/p.b" ]; do :; done
echo "$(cat "$D/p.a") $(cat "$D/p.b")"
read x
exit "$CODE"`

// Leftovers outside the program's group take the slow path: every one is
// signalled (each gets SIGTERM once, or SIGKILL when it outlives the
// grace) and none survives.
func TestReaperSlowPathSignalsEveryLeftover(t *testing.T) {
	c := shell(t, twoSessionsScript)
	c.Env = append(c.Env, "D="+t.TempDir(), "CODE=0")
	c.Reaper = reapers(t)
	p, _, line := startReady(t, context.Background(), c)
	var left []leftover
	for _, f := range strings.Fields(line) {
		pid, _ := strconv.Atoi(f)
		left = append(left, leftover{pid, identity(pid)})
	}
	p.Stdin().Close()
	if exit, err := p.Wait(); err != nil || !exit.Success() {
		t.Fatalf("exit = %+v, %v", exit, err)
	}
	assertGone(t, left)
	rep := parseSweep(t, supervise.SweepOf(p))
	term, _ := strconv.Atoi(rep["term"])
	kill, _ := strconv.Atoi(rep["kill"])
	if rep["fast"] != "false" || term+kill < len(left) {
		t.Fatalf("sweep = %v, want the slow path with a signal for each of %d leftovers", rep, len(left))
	}
}

// A leftover that ignores SIGTERM (inherited SIG_IGN survives exec) is
// still killed: the sweep escalates to SIGKILL.
func TestReaperKillsLeftoverIgnoringTerm(t *testing.T) {
	c := shell(t, `setsid sh -c 'trap "" TERM; echo $$ > "$0.s"; exec sleep 1000' "$D/p" &
while [ ! -s "$D/p.s" ]; do :; done
cat "$D/p.s"
read x
exit 0`)
	c.Env = append(c.Env, "D="+t.TempDir())
	c.Reaper = reapers(t)
	p, _, line := startReady(t, context.Background(), c)
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("bad pid line %q", line)
	}
	left := []leftover{{pid, identity(pid)}}
	if left[0].id == "" {
		t.Fatal("leftover not running before cleanup")
	}
	p.Stdin().Close()
	if exit, err := p.Wait(); err != nil || !exit.Success() {
		t.Fatalf("exit = %+v, %v", exit, err)
	}
	assertGone(t, left)
	if rep := parseSweep(t, supervise.SweepOf(p)); rep["fast"] != "false" || rep["kill"] == "0" {
		t.Fatalf("sweep = %v, want SIGKILL sent", rep)
	}
}

// A program that stops its reaper (SIGSTOP to its parent) cannot make Wait
// hang: the kill that follows a cancel finds the reaper unresponsive and
// kills it, which ends the program too.
func TestStoppedReaperIsKilled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	// The child stops its reaper only once Start has returned (the reaper
	// reported the child's pid), which the line on stdin tells it.
	c := shell(t, `read go; kill -STOP $PPID; echo ready; read x`)
	c.Reaper = reapers(t)
	c.KillGrace = 10 * time.Millisecond
	p, err := supervise.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := io.WriteString(p.Stdin(), "go\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("ready line %q: %v", line, err)
	}
	reaper, child := supervise.ReaperPid(p), p.Pid()
	id := identity(child)
	cancel()
	exit, err := p.Wait()
	p.Close()
	if err != context.Canceled || exit.Signal != syscall.SIGKILL {
		t.Fatalf("exit = %+v, %v; want the cancelled child killed", exit, err)
	}
	if identity(reaper) != "" {
		t.Fatal("the stopped reaper is still there")
	}
	for guard := time.Now().Add(10 * time.Second); identity(child) == id && time.Now().Before(guard); {
		time.Sleep(time.Millisecond) // the parent-death signal can trail Wait
	}
	assertGone(t, []leftover{{child, id}})
}

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
	// The failed exec is reported as such, unlike a program that exits
	// 127 by itself (or one that runs fine).
	for _, c := range []struct {
		path string
		args []string
		want bool
	}{
		{script, nil, true},
		{mustLook(t, "sh"), []string{"-c", "exit 127"}, false},
		{mustLook(t, "true"), nil, false},
	} {
		p, err := supervise.Start(context.Background(), supervise.Command{Path: c.path, Args: c.args, Reaper: self(t), OutputLimit: 10})
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Close()
		exit, _ := p.Wait()
		if got := p.ExecFailed(); got != c.want {
			t.Errorf("%s %v: ExecFailed = %v (exit %+v), want %v", c.path, c.args, got, exit, c.want)
		}
		p.Close()
	}
}

func TestReaperMainRejectsMissingProgram(t *testing.T) {
	if got := supervise.ReaperMain(nil); got == 0 {
		t.Fatal("ReaperMain without a program returned 0")
	}
}

// sweepReportOf makes c run under the test binary's reaper with a sweep
// report file, and returns a function that reads the report after Wait.
func sweepReportOf(t *testing.T, c *supervise.Command) func() string {
	t.Helper()
	path := t.TempDir() + "/sweep"
	c.Reaper = self(t)
	c.Env = append(c.Env, supervise.SweepReportEnv+"="+path)
	return func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no sweep report: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
}

// parseSweep splits a report line into its fields.
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
	if len(out) != 5 {
		t.Fatalf("bad sweep report %q", line)
	}
	return out
}

// With nothing left behind, the reaper exits straight after the program:
// no /proc scan, no signal, no grace period (the fast path). It also ran
// with one P: supervise set GOMAXPROCS=1 for it (and only for it, see
// TestRunEnvironmentIsExact).
func TestReaperFastPathWithoutDescendants(t *testing.T) {
	cases := map[string]string{
		"no child at all":         `exit 3`,
		"children already waited": `ls / >/dev/null; env >/dev/null; exit 3`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			c := shell(t, script)
			report := sweepReportOf(t, &c)
			res, err := supervise.Run(context.Background(), c, nil)
			if err != nil || res.Exit.Code != 3 {
				t.Fatalf("exit = %+v, %v; want code 3", res.Exit, err)
			}
			if got, want := report(), "fast=true term=0 kill=0 timedout=false procs=1"; got != want {
				t.Fatalf("sweep = %q, want %q", got, want)
			}
		})
	}
}

// Leftovers take the slow path: every one is signalled (each gets SIGTERM
// once, or SIGKILL when it outlives the grace) and none survives.
func TestReaperSlowPathSignalsEveryLeftover(t *testing.T) {
	c := shell(t, leaverScript)
	c.Env = append(c.Env, "D="+t.TempDir(), "CODE=0")
	report := sweepReportOf(t, &c)
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
	rep := parseSweep(t, report())
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
	report := sweepReportOf(t, &c)
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
	if rep := parseSweep(t, report()); rep["fast"] != "false" || rep["kill"] == "0" {
		t.Fatalf("sweep = %v, want SIGKILL sent", rep)
	}
}

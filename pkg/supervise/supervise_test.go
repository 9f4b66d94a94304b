package supervise_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// TestMain lets the test binary serve as the reaper, exactly as every
// binary that runs plugins does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	if dir := os.Getenv(orphanHelperEnv); dir != "" {
		os.Exit(orphanHelper(dir))
	}
	if os.Getenv(selfHelperEnv) != "" {
		os.Exit(selfHelper())
	}
	if os.Getenv(delegateHelperEnv) != "" {
		os.Exit(delegateHelper())
	}
	os.Exit(m.Run())
}

func mustLook(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s not found: %v", name, err)
	}
	return p
}

func self(tb testing.TB) string {
	tb.Helper()
	p, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// reapers returns a pool of the test binary's reapers, closed (and its
// reapers waited for) when the test ends.
func reapers(tb testing.TB) *supervise.ReaperPool {
	tb.Helper()
	pl := supervise.NewReaperPool(self(tb))
	tb.Cleanup(pl.Close)
	return pl
}

// shell returns a Command running script under sh with only PATH set.
func shell(tb testing.TB, script string) supervise.Command {
	return supervise.Command{
		Path:        mustLook(tb, "sh"),
		Args:        []string{"-c", script},
		Env:         []string{"PATH=" + os.Getenv("PATH")},
		OutputLimit: 1 << 20,
	}
}

// The child's environment is exactly Env, with or without the reaper (which
// runs itself with GOMAXPROCS=1 and must pass neither that entry nor
// anything of its own on).
func TestRunEnvironmentIsExact(t *testing.T) {
	t.Setenv("FORGE_SUPERVISE_LEAK", "must-not-appear")
	envs := map[string][]string{
		"":            {"A=1", "ZZ=two words"},
		" GOMAXPROCS": {"A=1", "GOMAXPROCS=7", "ZZ=two words"},
		" empty":      {},
	}
	for _, reaper := range []bool{false, true} {
		for name, env := range envs {
			t.Run(map[bool]string{false: "plain", true: "reaper"}[reaper]+name, func(t *testing.T) {
				c := supervise.Command{
					Path:        mustLook(t, "env"),
					Env:         env,
					OutputLimit: 4096,
				}
				if reaper {
					c.Reaper = reapers(t)
				}
				res, err := supervise.Run(context.Background(), c, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := strings.Join(env, "\n")
				if len(env) > 0 {
					want += "\n"
				}
				if got := string(res.Stdout); got != want {
					t.Fatalf("environment = %q, want %q", got, want)
				}
				if !res.Exit.Success() {
					t.Fatalf("exit = %+v", res.Exit)
				}
			})
		}
	}
}

// A variable set twice reaches the child once, with its last value, at
// the place of its last entry, with or without the reaper.
func TestRunEnvironmentDuplicatesLastWins(t *testing.T) {
	for _, pl := range []*supervise.ReaperPool{nil, reapers(t)} {
		c := supervise.Command{Path: mustLook(t, "env"), Env: []string{"A=1", "B=x", "A=2", "C="}, OutputLimit: 4096, Reaper: pl}
		res, err := supervise.Run(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(res.Stdout), "B=x\nA=2\nC=\n"; got != want {
			t.Fatalf("reaper %v: environment = %q, want %q", pl != nil, got, want)
		}
	}
}

func TestRunDirAndArgs(t *testing.T) {
	dir := t.TempDir()
	c := shell(t, `pwd; printf '%s|' "$0" "$1"`)
	c.Args = append(c.Args, "zero", "one two")
	c.Dir = dir
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if got, want := string(res.Stdout), real+"\nzero|one two|"; got != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
}

func TestRunPassesStdinAndExitCode(t *testing.T) {
	res, err := supervise.Run(context.Background(), shell(t, `read line; echo "got $line"; exit 3`), []byte("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "got hello\n" || res.Exit.Code != 3 || res.Exit.Success() {
		t.Fatalf("result = %q %+v", res.Stdout, res.Exit)
	}
}

func TestStderrIsPrivateAndBounded(t *testing.T) {
	c := shell(t, `i=0; while [ $i -lt 200 ]; do printf 'secret-%03d\n' $i >&2; i=$((i+1)); done`)
	c.StderrBytes = 24
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stderr), "secret-000\nsecret-001\nse"; got != want {
		t.Fatalf("stderr = %q, want %q", got, want)
	}
	if len(res.Stdout) != 0 {
		t.Fatalf("stderr leaked into stdout: %q", res.Stdout)
	}
}

func TestOutputLimit(t *testing.T) {
	cases := map[string]string{
		"stdout":   `head -c 5000 /dev/zero; exec sleep 1000`,
		"stderr":   `head -c 5000 /dev/zero >&2; exec sleep 1000`,
		"combined": `head -c 600 /dev/zero; head -c 600 /dev/zero >&2; exec sleep 1000`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			c := shell(t, script)
			c.OutputLimit = 1000
			res, err := supervise.Run(context.Background(), c, nil)
			if !errors.Is(err, supervise.ErrOutputLimit) {
				t.Fatalf("err = %v, want output limit", err)
			}
			if len(res.Stdout) > 1000 || len(res.Stderr) > 1000 {
				t.Fatalf("kept %d stdout and %d stderr bytes over a budget of 1000", len(res.Stdout), len(res.Stderr))
			}
			if res.Exit.Success() {
				t.Fatal("child was not stopped")
			}
		})
	}
}

func TestOutputWithinLimitIsNotAnError(t *testing.T) {
	c := shell(t, `head -c 600 /dev/zero; head -c 400 /dev/zero >&2`)
	c.OutputLimit = 1000
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil || len(res.Stdout) != 600 || !res.Exit.Success() {
		t.Fatalf("err=%v stdout=%d exit=%+v", err, len(res.Stdout), res.Exit)
	}
}

func TestTimeout(t *testing.T) {
	c := shell(t, `exec sleep 1000`)
	c.Timeout = 20 * time.Millisecond
	res, err := supervise.Run(context.Background(), c, nil)
	if !errors.Is(err, supervise.ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
	if res.Exit.Signal != syscall.SIGTERM {
		t.Fatalf("exit = %+v, want SIGTERM", res.Exit)
	}
}

// startReady starts c and reads its first stdout line, which the script
// prints once it is ready.
func startReady(t *testing.T, ctx context.Context, c supervise.Command) (*supervise.Process, *bufio.Reader, string) {
	t.Helper()
	p, err := supervise.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r := bufio.NewReader(p.Stdout())
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read ready line: %v", err)
	}
	return p, r, strings.TrimSpace(line)
}

func TestCancelTerminatesThenKillsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := shell(t, `trap '' TERM; echo ready; exec sleep 1000`)
	c.KillGrace = 20 * time.Millisecond
	p, _, _ := startReady(t, ctx, c)
	cancel()
	exit, err := p.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if exit.Signal != syscall.SIGKILL {
		t.Fatalf("exit = %+v, want SIGKILL after ignored SIGTERM", exit)
	}
}

func TestStartErrorsAreValueFree(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "secret-name")
	notExec := filepath.Join(t.TempDir(), "secret-file")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]supervise.Command{
		"missing":         {Path: missing, Args: []string{"secret-arg"}, OutputLimit: 1},
		"missing reaper":  {Path: missing, Reaper: reapers(t), OutputLimit: 1},
		"not executable":  {Path: notExec, OutputLimit: 1},
		"not exec reaper": {Path: notExec, Reaper: reapers(t), OutputLimit: 1},
		"bad dir reaper":  {Path: mustLook(t, "sh"), Dir: missing, Reaper: reapers(t), OutputLimit: 1},
		"bad dir":         {Path: mustLook(t, "sh"), Dir: missing, OutputLimit: 1},
		"no limit":        {Path: mustLook(t, "sh")},
		"NUL in env":      {Path: mustLook(t, "sh"), Env: []string{"SECRET=a\x00b"}, Reaper: reapers(t), OutputLimit: 1},
		"NUL in arg":      {Path: mustLook(t, "sh"), Args: []string{"secret\x00"}, OutputLimit: 1},
		"empty path":      {OutputLimit: 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := supervise.Run(context.Background(), c, nil)
			var se *supervise.StartError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *StartError", err)
			}
			for _, bad := range []string{"secret", t.TempDir()[:5]} {
				if strings.Contains(err.Error(), bad) {
					t.Fatalf("error %q leaks %q", err, bad)
				}
			}
		})
	}
}

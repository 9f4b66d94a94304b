//go:build linux && (amd64 || arm64)

package sandbox_test

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/seccomptest"
)

// guardScript changes metadata inside its workspace and outside it, and
// lists its descriptors (the filter's listener must not be among them).
const guardScript = `p() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=yes"; else echo "$n=no"; fi; }
p chmod-inside chmod 0700 "$WS/f"
p touch-inside touch -d @1000000000 "$WS/f"
p chmod-outside chmod 0600 "$OUT"
p touch-outside touch -c "$OUT"
p chown-outside chown -h "$(id -u)" "$OUT"
echo fds=$(ls /proc/self/fd | tr '\n' ,)
`

// runGuarded starts sh -c script from a fresh locked thread restricted to
// p and guarded (armed with p), waits for it, closes the guard and returns its output.
func runGuarded(t *testing.T, p *sandbox.Policy, env []string, script string) string {
	t.Helper()
	return runGuardedArmed(t, p, p, env, script)
}

// runGuardedArmed is runGuarded with the guard armed with armed (nil:
// never armed).
func runGuardedArmed(t *testing.T, p, armed *sandbox.Policy, env []string, script string) string {
	t.Helper()
	return fromLockedThread(t, func() (func(), error) {
		if _, err := sandbox.RestrictThread(p, nil); err != nil {
			return nil, err
		}
		g, err := guardThread(armed)
		if err != nil {
			return nil, err
		}
		return g.Close, nil
	}, "/bin/sh", []string{"sh", "-c", script}, env)
}

// fromLockedThread runs setup on a fresh locked thread (which it may
// restrict or filter for good: the thread ends with the call), starts argv
// from that thread with its stdout on a pipe, waits for it, runs the
// cleanup setup returned and returns what the program printed.
func fromLockedThread(t *testing.T, setup func() (cleanup func(), err error), path string, argv, env []string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		defer w.Close()
		cleanup, err := setup()
		if err != nil {
			errs <- err
			return
		}
		defer cleanup()
		pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, w.Fd(), 2}})
		if err == nil {
			var ws syscall.WaitStatus
			_, err = syscall.Wait4(pid, &ws, 0, nil)
		}
		errs <- err
	}()
	out := make(chan string, 1)
	go func() {
		b := make([]byte, 1<<16)
		n, _ := readFull(r, b)
		out <- string(b[:n])
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return <-out
}

// guardThread puts the calling thread under the metadata filter and
// serves it, armed with p unless p is nil.
func guardThread(p *sandbox.Policy) (*sandbox.Guard, error) {
	fd, err := sandbox.GuardThread()
	if err != nil {
		return nil, err
	}
	g, err := sandbox.Serve(fd)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return g, nil
	}
	if err := g.Arm(p); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := f.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// inherited is what ls /proc/self/fd lists in a child: 0, 1, 2, its own
// directory's 3, and whatever the test process holds without
// close-on-exec (a test runner may pass some).
func inherited(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"0", "1", "2", "3"}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 3 {
			continue
		}
		if fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0); errno == 0 && fl&syscall.FD_CLOEXEC == 0 {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",") + ","
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A guarded program changes metadata inside its ReadWrite tree and not
// outside it, even as root (the guard's check is not DAC's); its
// descriptors are its three standard ones (the listener is close-on-exec);
// and a guard leaves no descriptor or goroutine behind (its listener and
// its goroutine end with Close).
func TestGuardMetadata(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	for _, f := range []string{filepath.Join(ws, "f"), out} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := &sandbox.Policy{}
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"} {
		p.Rules = append(p.Rules, sandbox.Rule{Path: d, Access: sandbox.ReadOnly, Optional: true})
	}
	p.Rules = append(p.Rules, sandbox.Rule{Path: "/dev/null", Access: sandbox.Device}, sandbox.Rule{Path: ws, Access: sandbox.ReadWrite})
	env := []string{"PATH=/usr/bin:/bin", "WS=" + ws, "OUT=" + out}
	runGuarded(t, p, env, guardScript) // warm up: the runtime's threads
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	for range 3 {
		got := map[string]string{}
		for _, line := range strings.Fields(runGuarded(t, p, env, guardScript)) {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
		}
		want := map[string]string{"chmod-inside": "yes", "touch-inside": "yes", "chmod-outside": "no",
			"touch-outside": "no", "chown-outside": "no", "fds": inherited(t)}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
	}
	// The same rules as a Shared: its ReadWrite rules are writable trees
	// for the guard too.
	shared, err := sandbox.NewShared(p.Rules, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	got := runGuarded(t, &sandbox.Policy{Shared: shared}, env, guardScript)
	if !strings.Contains(got, "chmod-inside=yes") || !strings.Contains(got, "chmod-outside=no") {
		t.Errorf("with the rules shared:\n%s", got)
	}
	if st, err := os.Stat(filepath.Join(ws, "f")); err != nil || st.Mode().Perm() != 0o700 || st.ModTime().Unix() != 1000000000 {
		t.Errorf("inside: %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("outside changed: %v %v", st.Mode(), err)
	}
	// Never armed, or disarmed, a guard refuses what it would serve armed.
	got = runGuardedArmed(t, p, nil, env, guardScript)
	if !strings.Contains(got, "chmod-inside=no") || !strings.Contains(got, "touch-inside=no") {
		t.Errorf("disarmed:\n%s", got)
	}
	// Closed, a guard's goroutine and listener are gone (the listener
	// once the goroutine has let go of it).
	deadline := time.Now().Add(2 * time.Second)
	for (runtime.NumGoroutine() > goroutines || openFDs(t) > fds) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("descriptors: %d after, %d before", n, fds)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("goroutines: %d after, %d before", n, goroutines)
	}
}

// Arm replaces what a guard serves, Disarm takes it back, Close ends it.
func TestGuardArmDisarm(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := &sandbox.Policy{}
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"} {
		p.Rules = append(p.Rules, sandbox.Rule{Path: d, Access: sandbox.ReadOnly, Optional: true})
	}
	p.Rules = append(p.Rules, sandbox.Rule{Path: "/dev/null", Access: sandbox.Device},
		sandbox.Rule{Path: a, Access: sandbox.ReadWrite}, sandbox.Rule{Path: b, Access: sandbox.ReadWrite})
	onlyB := &sandbox.Policy{Rules: []sandbox.Rule{{Path: b, Access: sandbox.ReadWrite}}}
	script := `for d in "$A" "$B"; do if chmod 0700 "$d/f" 2>/dev/null; then echo yes; else echo no; fi; done`
	got := strings.Fields(runGuardedArmed(t, p, onlyB, []string{"PATH=/usr/bin:/bin", "A=" + a, "B=" + b}, script))
	if strings.Join(got, " ") != "no yes" {
		t.Errorf("armed with b only: %q, want no yes", got)
	}
	if err := (&sandbox.Guard{}).Arm(&sandbox.Policy{Rules: []sandbox.Rule{{Path: "relative", Access: sandbox.ReadWrite}}}); err == nil {
		t.Error("Arm took a policy that does not check")
	}
	// A descriptor that is no listener (a regular file)
	// is refused and closed.
	fd, err := syscall.Open(filepath.Join(a, "f"), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Serve(fd); err == nil {
		t.Error("Serve took a regular file")
	}
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0); e != syscall.EBADF {
		t.Errorf("the refused descriptor is still open (%v)", e)
	}
}

// probeUnder runs the test binary in probe mode from a fresh locked
// thread, under a seccomp filter refusing seccomp(2) when deny is set (the
// child inherits it on every thread, as a service manager's filter), and
// returns what it printed.
func probeUnder(t *testing.T, deny bool) string {
	t.Helper()
	return strings.TrimSpace(fromLockedThread(t, func() (func(), error) {
		if deny {
			if err := seccomptest.RefuseSeccomp(false); err != nil {
				return nil, err
			}
		}
		return func() {}, nil
	}, os.Args[0], []string{os.Args[0]}, []string{probeEnv + "=1"}))
}

// ProbeGuard passes here, and fails (with the errno, as the Worker's
// refusal to start says) in a process whose filter refuses seccomp(2).
func TestProbeGuard(t *testing.T) {
	if err := sandbox.ProbeGuard(); err != nil {
		t.Fatalf("ProbeGuard: %v", err)
	}
	if got := probeUnder(t, false); got != "ok" {
		t.Errorf("child without a filter: %q, want ok", got)
	}
	if got := probeUnder(t, true); got != "refused: operation not permitted" {
		t.Errorf("child whose filter refuses seccomp: %q", got)
	}
}

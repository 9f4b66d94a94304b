//go:build linux && (amd64 || arm64)

package sandbox_test

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// BenchmarkGuardArm is what the guard costs one sandboxed start: arming
// a served guard with the program's policy and disarming it after
// (cpu-us/op; ns/op is wall time). The filter itself is installed once
// per process that starts programs (GuardProcess), not per start;
// BenchmarkGuardInstall is that once.
func BenchmarkGuardArm(b *testing.B) {
	p := &sandbox.Policy{Rules: []sandbox.Rule{{Path: b.TempDir(), Access: sandbox.ReadWrite}, {Path: b.TempDir(), Access: sandbox.ReadWrite}}}
	g := servedThreadGuard(b)
	defer g.Close()
	defer reportCPU(b)()
	for range b.N {
		if err := g.Arm(p); err != nil {
			b.Fatal(err)
		}
		g.Disarm()
	}
}

// servedThreadGuard serves a filter installed on a throwaway thread.
func servedThreadGuard(b *testing.B) *sandbox.Guard {
	fds := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, filtered, ends with the goroutine
		fd, err := sandbox.GuardThread()
		fds <- fd
		errs <- err
	}()
	fd := <-fds
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	g, err := sandbox.Serve(fd)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkGuardInstall is the filter's installation on a fresh locked
// thread with no_new_privs, served and closed: what every sandboxed start
// paid while the filter was installed per start. The bare thread is
// BenchmarkBareThread.
func BenchmarkGuardInstall(b *testing.B) {
	defer reportCPU(b)()
	for range b.N {
		g := servedThreadGuard(b)
		g.Close()
	}
}

// BenchmarkBareThread is BenchmarkGuardInstall without the filter.
func BenchmarkBareThread(b *testing.B) {
	defer reportCPU(b)()
	for range b.N {
		errs := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			_, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, 38, 1, 0, 0, 0, 0)
			if e != 0 {
				errs <- e
				return
			}
			errs <- nil
		}()
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the process's CPU time (every thread, user and
// system) per iteration as cpu-us/op, from now until the returned
// function runs.
func reportCPU(b *testing.B) func() {
	cpu := func() float64 {
		var r syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r)
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e3
	}
	start := cpu()
	return func() { b.ReportMetric((cpu()-start)/float64(b.N), "cpu-us/op") }
}

// BenchmarkGuardedChmod is one chmod the guard serves (a file in the
// ReadWrite tree, from a restricted and guarded thread: the round trip to
// the guard's goroutine and its checks); BenchmarkChmod the same call
// unguarded.
func BenchmarkGuardedChmod(b *testing.B) {
	ws := b.TempDir()
	f := filepath.Join(ws, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	p := &sandbox.Policy{Rules: []sandbox.Rule{{Path: ws, Access: sandbox.ReadWrite}}}
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, err := sandbox.RestrictThread(p, nil); err != nil {
			errs <- err
			return
		}
		fd, err := sandbox.GuardThread()
		if err != nil {
			errs <- err
			return
		}
		g, err := sandbox.Serve(fd)
		if err == nil {
			err = g.Arm(p)
		}
		if err != nil {
			errs <- err
			return
		}
		defer g.Close()
		b.ResetTimer()
		for i := range b.N {
			if err := syscall.Chmod(f, 0o600|uint32(i&1)<<6); err != nil {
				errs <- err
				return
			}
		}
		b.StopTimer()
		errs <- nil
	}()
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkChmod(b *testing.B) {
	f := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if err := syscall.Chmod(f, 0o600|uint32(i&1)<<6); err != nil {
			b.Fatal(err)
		}
	}
}

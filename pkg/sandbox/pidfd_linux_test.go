//go:build linux && (amd64 || arm64)

package sandbox

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// Where the kernel refuses PIDFD_THREAD (EINVAL, Linux 6.7 and 6.8), the
// guard opens a pidfd of the calling thread's process instead, and
// pidfd_getfd through it reads the thread's descriptors (the table the
// threads share). Both paths reach the same file; a thread that is gone
// is ESRCH.
func TestCallerPidfdFallback(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var want syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &want); err != nil {
		t.Fatal(err)
	}
	tids := make(chan int)
	done := make(chan struct{})
	go func() { // a thread that is not the process's leader
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		<-done
	}()
	tid := <-tids
	defer close(done)
	var asked []int
	old := func(pid int, flags uintptr) (int, syscall.Errno) { // a kernel before 6.9
		asked = append(asked, pid)
		if flags&pidfdThread != 0 {
			return -1, syscall.EINVAL
		}
		return pidfdOpen(pid, flags)
	}
	for name, open := range map[string]func(int, uintptr) (int, syscall.Errno){"PIDFD_THREAD": pidfdOpen, "fallback": old} {
		asked = nil
		pidfd, e := callerPidfd(tid, open)
		if e != 0 {
			t.Fatalf("%s: %v", name, e)
		}
		fd, _, e := syscall.Syscall(sysPidfdGetfd, uintptr(pidfd), r.Fd(), 0)
		syscall.Close(pidfd)
		if e != 0 {
			t.Fatalf("%s: pidfd_getfd: %v", name, e)
		}
		var got syscall.Stat_t
		err := syscall.Fstat(int(fd), &got)
		syscall.Close(int(fd))
		if err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
			t.Fatalf("%s: pidfd_getfd read another file", name)
		}
		if name == "fallback" && (len(asked) != 2 || asked[0] != tid || asked[1] != os.Getpid()) {
			t.Fatalf("fallback asked for %v, want the thread %d, then the process %d", asked, tid, os.Getpid())
		}
	}
	if _, e := callerPidfd(1<<22+1, old); e != syscall.ESRCH {
		t.Fatalf("a thread that does not exist: %v", e)
	}
}

func TestParseTgid(t *testing.T) {
	status := "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\n"
	if n, ok := parseTgid([]byte(status)); !ok || n != 4242 {
		t.Fatalf("got %d %v", n, ok)
	}
	for _, bad := range []string{"", "Tgid:\n", "Tgid:\t-1\n", "Tgid:\t0\n", "Tgid:\t99999999\n", "Tgid:\t12a\n", "Pid:\t7\n", "Tgid:\t4194305\n"} {
		if n, ok := parseTgid([]byte(bad)); ok {
			t.Errorf("%q: %d", bad, n)
		}
	}
}

// FuzzParseTgid: any text parses without a panic, to a pid in range or
// to nothing.
func FuzzParseTgid(f *testing.F) {
	f.Add([]byte("Name:\tx\nTgid:\t4242\nPid:\t4243\n"))
	f.Add([]byte("Tgid:\t" + strings.Repeat("9", 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok := parseTgid(b); ok && (n <= 0 || n > 1<<22) {
			t.Fatalf("%d", n)
		}
	})
}

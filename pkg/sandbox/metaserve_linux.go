//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"unsafe"
)

// Guard answers the metadata calls Landlock does not govern (chmod,
// chown, utimes and their relatives, setting and removing extended
// attributes) for the processes under one metadata filter (GuardProcess).
// The filter hands each call to the guard; armed with a Policy, the guard
// performs it itself when the object lies beneath one of the policy's
// ReadWrite rules (its own or its Shared's), and refuses it (EACCES)
// otherwise; disarmed, it refuses every call. Its methods may be called
// from any goroutine.
type Guard struct {
	file *os.File // the listener, waited on through the runtime's poller

	mu     sync.Mutex
	fd     int // file's descriptor
	roots  rootSet
	net    *netArm // nil: disarmed
	closed bool
}

// Serve serves the filter whose listener is fd (from GuardProcess, in
// another process: a filtered process cannot serve its own filter) and
// takes fd over: one goroutine waits for its calls through the runtime's
// poller, holding no thread while none comes. The guard starts disarmed.
// The error carries only an errno.
func Serve(fd int) (*Guard, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, errnoOnly(err)
	}
	g := &Guard{file: os.NewFile(uintptr(fd), "seccomp-listener"), fd: fd}
	rc, err := g.file.SyscallConn()
	if err != nil {
		g.file.Close()
		return nil, errnoOnly(err)
	}
	// Only a listener: anything else (a file, a pipe) is refused here
	// rather than served.
	if name, ok := fdName(fd); !ok || name != "anon_inode:seccomp notify" {
		g.file.Close()
		return nil, syscall.EINVAL
	}
	go g.serve(rc)
	return g, nil
}

// Arm makes the guard serve p's ReadWrite trees and its Connect
// endpoints (counting refusals in p.Refusals), in place of what it served
// before. Arm it before the program starts, and disarm it once the
// program and everything it started are gone. The error carries only an
// errno.
func (g *Guard) Arm(p *Policy) error {
	if err := p.Check(); err != nil {
		return err
	}
	// The roots are opened now, before the program runs: later, a
	// program could have renamed a writable tree nested in another and put
	// a symbolic link to anywhere in its place. Their names, which cost a
	// readlink each, wait for the first call (most programs make none).
	var rw []string
	for _, r := range append(p.Shared.Rules(), p.Rules...) { // a policy is its Shared and its own rules
		if r.Access == ReadWrite {
			rw = append(rw, r.Path)
		}
	}
	roots := openRoots(rw)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		roots.close()
		return syscall.EBADF
	}
	g.roots.close()
	g.roots = roots
	g.net = &netArm{connect: slices.Clone(p.Connect), refusals: p.Refusals}
	return nil
}

// Disarm makes the guard refuse every call until it is armed again.
func (g *Guard) Disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roots.close()
	g.roots = nil
	g.net = nil
}

// Close ends the guard: a call still waiting for its answer, or made
// after, fails (ENOSYS).
func (g *Guard) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.roots.close()
	g.roots = nil
	g.net = nil
	g.mu.Unlock()
	// Unlocked: closing waits for the serving goroutine, which may be
	// waiting for g.mu, to let go of the listener; its read then fails.
	g.file.Close()
}

// serve answers the listener's notifications until it hangs up (the
// filter has no task left), breaks, or the guard is closed.
func (g *Guard) serve(rc syscall.RawConn) {
	rc.Read(func(uintptr) bool {
		for {
			g.mu.Lock()
			wait, done := g.serveOne()
			g.mu.Unlock()
			if done {
				return true
			}
			if wait {
				return false // nothing pending: wait for the poller
			}
		}
	})
}

// serveOne answers one pending notification, if any (g.mu is held). It
// reports wait when none is pending, done when the guard is closed or its
// listener hung up or failed.
func (g *Guard) serveOne() (wait, done bool) {
	if g.closed {
		return false, true
	}
	pfd := [8]byte{} // struct pollfd
	binary.NativeEndian.PutUint32(pfd[0:], uint32(g.fd))
	binary.NativeEndian.PutUint16(pfd[4:], pollIn)
	var zero syscall.Timespec
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	rev := binary.NativeEndian.Uint16(pfd[6:])
	switch {
	case e == syscall.EINTR:
		return false, false
	case e != 0:
		return false, true
	case n == 1 && rev&pollIn != 0:
		return false, !g.roots.handle(g.fd, g.net) // never blocks: a notification is pending
	case n == 1 && rev&pollHangUps != 0:
		return false, true
	}
	return true, false
}

// GuardProcess puts every thread of the calling process, and everything
// they start from now on, under the metadata filter, sets no_new_privs on
// them all, and returns the filter's listener (close-on-exec) for another
// process to serve (Serve): the filtered process's own metadata
// calls go to the guard too, so it must not serve it itself. Like a
// Landlock domain the filter cannot be lifted; it is for a process that
// starts nothing but sandboxed programs (pkg/supervise's guarded
// reapers), which then inherit it at no cost per start. The error carries
// only an errno.
func GuardProcess() (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return -1, e
	}
	return installMetaFilter(true)
}

// ProbeGuard installs the metadata filter once, on a throwaway thread, and
// reports whether that works here: a Linux kernel without seccomp user
// notification (before 5.0), or a service manager's filter that refuses
// seccomp(2), would otherwise fail every sandboxed start. The error carries
// only an errno.
func ProbeGuard() error {
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, filtered, ends with the goroutine
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
			errs <- e
			return
		}
		fd, err := installMetaFilter(false)
		if err == nil {
			syscall.Close(fd)
		}
		errs <- err
	}()
	return <-errs
}

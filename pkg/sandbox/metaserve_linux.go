//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// Guards serves metadata guards: one goroutine waits on an epoll set of
// their filters' listeners, so arming a guard for a program costs no
// goroutine and no hand-off. The goroutine and the set exist while at
// least one guard is open. Its zero value is ready; its methods and the
// Guards' may be called from any goroutine.
type Guards struct {
	mu     sync.Mutex
	epfd   int               // the current epoll set, valid while file is set
	file   *os.File          // the set, as the serving goroutine reads it
	guards map[uint32]*Guard // by id, the epoll event's data
	next   uint32
}

// Guard answers the metadata calls Landlock does not govern (chmod,
// chown, utimes and their relatives, setting and removing extended
// attributes) for the processes under one metadata filter (GuardProcess).
// The filter hands each call to the guard; armed with a Policy, the guard
// performs it itself when the object lies beneath one of the policy's
// ReadWrite rules (its own or its Shared's), and refuses it (EACCES)
// otherwise; disarmed, it refuses every call.
type Guard struct {
	gs    *Guards
	id    uint32
	fd    int // the listener, -1 once closed
	roots rootSet
}

// Serve serves the filter whose listener is fd (from GuardProcess, in
// another process: a filtered process cannot serve its own filter) and
// takes fd over. The guard starts disarmed. The error carries only an
// errno.
func (gs *Guards) Serve(fd int) (*Guard, error) {
	g, set, err := gs.add(fd)
	if set != nil {
		set.Close() // unlocked, see idle
	}
	return g, err
}

// add registers listener fd; on failure it returns the set to close when
// no guard is left (see idle).
func (gs *Guards) add(fd int) (*Guard, *os.File, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.file == nil {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			syscall.Close(fd)
			return nil, nil, errnoOnly(err)
		}
		if err := syscall.SetNonblock(epfd, true); err != nil {
			syscall.Close(epfd)
			syscall.Close(fd)
			return nil, nil, errnoOnly(err)
		}
		gs.epfd, gs.file = epfd, os.NewFile(uintptr(epfd), "epoll")
		if gs.guards == nil {
			gs.guards = map[uint32]*Guard{}
		}
		go gs.serve(gs.file)
	}
	gs.next++
	g := &Guard{gs: gs, id: gs.next, fd: fd}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(g.id)}
	if err := syscall.EpollCtl(gs.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return nil, gs.idle(), errnoOnly(err)
	}
	gs.guards[g.id] = g
	return g, nil, nil
}

// Arm makes the guard serve p's ReadWrite trees, in place of what it
// served before. Arm it before the program starts, and disarm it once the
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
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if g.fd < 0 {
		roots.close()
		return syscall.EBADF
	}
	g.roots.close()
	g.roots = roots
	return nil
}

// Disarm makes the guard refuse every call until it is armed again.
func (g *Guard) Disarm() {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.roots.close()
	g.roots = nil
}

// Close ends the guard: a call still waiting for its answer, or made
// after, fails (ENOSYS).
func (g *Guard) Close() {
	gs := g.gs
	gs.mu.Lock()
	if g.fd < 0 {
		gs.mu.Unlock()
		return
	}
	syscall.EpollCtl(gs.epfd, syscall.EPOLL_CTL_DEL, g.fd, nil)
	delete(gs.guards, g.id)
	syscall.Close(g.fd)
	g.fd = -1
	g.roots.close()
	g.roots = nil
	set := gs.idle()
	gs.mu.Unlock()
	if set != nil {
		set.Close()
	}
}

// idle detaches the set once no guard is left (gs.mu is held) and
// returns it, for the caller to close after unlocking: closing it ends
// the serving goroutine's read, and waits for the goroutine, which may be
// waiting for gs.mu, to let go of it.
func (gs *Guards) idle() *os.File {
	if len(gs.guards) != 0 || gs.file == nil {
		return nil
	}
	set := gs.file
	gs.file = nil
	return set
}

// serve answers the guards' notifications until the set is closed. An
// event names its guard by id, never by descriptor: a listener closed and
// its number reused cannot receive another guard's event.
func (gs *Guards) serve(set *os.File) {
	rc, err := set.SyscallConn()
	if err != nil {
		return
	}
	var evs [8]syscall.EpollEvent
	rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.EpollWait(int(fd), evs[:], 0)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				return err != nil // nothing ready: wait for the poller
			}
			for _, ev := range evs[:n] {
				gs.mu.Lock()
				if g := gs.guards[uint32(ev.Fd)]; g != nil && g.fd >= 0 && !g.serveOne() {
					// Hung up (the filter has no task left) or broken:
					// nothing more to answer until Close.
					syscall.EpollCtl(int(fd), syscall.EPOLL_CTL_DEL, g.fd, nil)
				}
				gs.mu.Unlock()
			}
		}
	})
}

// serveOne answers one pending notification of g, if any; it reports false
// when the listener hung up or failed.
func (g *Guard) serveOne() bool {
	pfd := [8]byte{} // struct pollfd
	binary.NativeEndian.PutUint32(pfd[0:], uint32(g.fd))
	binary.NativeEndian.PutUint16(pfd[4:], pollIn)
	var zero syscall.Timespec
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	rev := binary.NativeEndian.Uint16(pfd[6:])
	switch {
	case e == syscall.EINTR:
		return true
	case e != 0:
		return false
	case n == 1 && rev&pollIn != 0:
		return g.roots.handle(g.fd) // never blocks: a notification is pending
	case n == 1 && rev&pollHangUps != 0:
		return false
	}
	return true
}

// GuardProcess puts every thread of the calling process, and everything
// they start from now on, under the metadata filter, sets no_new_privs on
// them all, and returns the filter's listener (close-on-exec) for another
// process to serve (Guards.Serve): the filtered process's own metadata
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

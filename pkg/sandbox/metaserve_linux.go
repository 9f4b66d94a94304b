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

// Guards serves the metadata guards of one process's sandboxed programs
// (a reaper's, one after the other): one goroutine, started with the first
// guard and kept for the next ones, waits on an epoll set of their filters'
// listeners, so a start costs two epoll_ctl calls rather than a goroutine
// and its hand-offs. Its zero value is ready; Start and Close may be
// called from any goroutine.
type Guards struct {
	mu     sync.Mutex
	epfd   int // valid once started
	file   *os.File
	guards map[uint32]*Guard // by id, the epoll event's data
	next   uint32
}

// Guard answers, for one sandboxed program and everything it starts, the
// metadata calls Landlock does not govern (chmod, chown, utimes and their
// relatives, setting and removing extended attributes): the filter Start
// installs hands each one to the guard, which performs it itself when the
// object lies beneath one of the policy's ReadWrite rules (its own or
// its Shared's) and refuses it (EACCES) otherwise.
type Guard struct {
	gs    *Guards
	id    uint32
	fd    int // the listener, -1 once closed
	roots rootSet
}

// Start installs the metadata filter on the calling OS thread, which
// RestrictThread has put in p's domain (no_new_privs is set), and serves
// its notifications from the Guards' goroutine, outside any domain. Like
// the domain, the filter binds the thread for good and is inherited by the
// program it starts. The filter's listener is close-on-exec. Close the
// guard once the program and all it started are gone. The error carries
// only an errno.
func (gs *Guards) Start(p *Policy) (*Guard, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.file == nil {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return nil, errnoOnly(err)
		}
		if err := syscall.SetNonblock(epfd, true); err != nil {
			syscall.Close(epfd)
			return nil, errnoOnly(err)
		}
		gs.epfd, gs.file, gs.guards = epfd, os.NewFile(uintptr(epfd), "epoll"), map[uint32]*Guard{}
		go gs.serve()
	}
	fd, err := installMetaFilter()
	if err != nil {
		return nil, err
	}
	gs.next++
	g := &Guard{gs: gs, id: gs.next, fd: fd}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(g.id)}
	if err := syscall.EpollCtl(gs.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return nil, errnoOnly(err)
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
	g.roots = openRoots(rw)
	gs.guards[g.id] = g
	return g, nil
}

// Close ends the guard: a call still waiting for its answer, or made
// after, fails (ENOSYS). Call it only when no process of the program is
// left.
func (g *Guard) Close() {
	gs := g.gs
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g.fd < 0 {
		return
	}
	syscall.EpollCtl(gs.epfd, syscall.EPOLL_CTL_DEL, g.fd, nil)
	delete(gs.guards, g.id)
	syscall.Close(g.fd)
	g.fd = -1
	g.roots.close()
}

// serve answers the guards' notifications for as long as the process
// lives. An event names its guard by id, never by descriptor: a listener
// closed and its number reused cannot receive another guard's event.
func (gs *Guards) serve() {
	rc, err := gs.file.SyscallConn()
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
					syscall.EpollCtl(gs.epfd, syscall.EPOLL_CTL_DEL, g.fd, nil)
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
		fd, err := installMetaFilter()
		if err == nil {
			syscall.Close(fd)
		}
		errs <- err
	}()
	return <-errs
}

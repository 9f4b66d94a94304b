package supervise

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// reaperStartTimeout bounds how long supervise waits for a reaper's answer
// to a spawn (a fork and exec); a reaper that does not answer is stopped.
const reaperStartTimeout = 30 * time.Second

// reaperStopWait bounds how long stop waits for a reaper to finish its
// cleanup and exit before it kills it.
const reaperStopWait = 2 * time.Second

// reaperConn is supervise's end of one reaper process.
type reaperConn struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	buf  [64]byte
	// shared is the Key of the sandbox.Shared the reaper holds: the last
	// one it was sent ("" for none).
	shared string
	// guard serves a guarded reaper's metadata filter (nil: the reaper is
	// not guarded and starts no sandboxed program). It is armed with a
	// program's policy from before its spawn until its end is reported.
	// Each guard has its own goroutine: a program that keeps its guard
	// busy delays no other program's calls or start.
	guard *sandbox.Guard
}

// startReaper starts a reaper process from exe with its end of a new
// SOCK_SEQPACKET socket pair as fd 3. The reaper runs with GOMAXPROCS=1 as
// its whole environment (its Go runtime then sizes itself without reading
// /proc and /sys) in a session of its own: terminal signals meant for the
// caller do not reach it, and neither it nor any program it starts (each
// in a process group of its own) has a controlling terminal. One session
// per reaper, not per program, also spares every start a new autogroup
// of the scheduler.
func startReaper(exe string) (*reaperConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, startError("create reaper socket", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "reaper"), os.NewFile(uintptr(fds[1]), "reaper")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, startError("create reaper socket", err)
	}
	conn, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, &StartError{Reason: "create reaper socket"}
	}
	name := exe // what ps shows
	if exe == procSelfExe && len(os.Args) > 0 {
		name = os.Args[0]
	}
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{name, ReaperArg},
		Env:         []string{"GOMAXPROCS=1"},
		ExtraFiles:  []*os.File{theirs},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, startError("start reaper", err)
	}
	return &reaperConn{cmd: cmd, conn: conn}, nil
}

var errReaperGone = errors.New("reaper connection failed")

// spawn asks the reaper to start req with files as its stdin, stdout and
// stderr (and prog, when set, as the program's file), in inv's cgroup when inv is set (then with out, the read end of
// its stdout), and returns the reaper's answer (msgStarted or msgFailed).
// With inv, files are closed as soon as they are sent (sent reports it),
// and only then is the reaper told to go: once the program has ended,
// the reaper takes a writer left on stdout for a process the program
// started, so supervise must hold none by the time it starts.
func (rc *reaperConn) spawn(msg []byte, files [3]*os.File, prog *os.File, inv *invocation, out *os.File) (r reply, sent bool, err error) {
	fds := []int{int(files[0].Fd()), int(files[1].Fd()), int(files[2].Fd())}
	if prog != nil {
		fds = append(fds, int(prog.Fd()))
	}
	if inv != nil {
		fds = append(fds, inv.fd, inv.cg.home, int(out.Fd()))
	}
	rights := syscall.UnixRights(fds...)
	rc.conn.SetDeadline(time.Now().Add(reaperStartTimeout))
	defer rc.conn.SetDeadline(time.Time{})
	if _, _, err := rc.conn.WriteMsgUnix(msg, rights, nil); err != nil {
		return reply{}, false, errReaperGone
	}
	if inv != nil {
		closeFiles(files[:]...)
		if _, err := rc.conn.Write([]byte{msgGo}); err != nil {
			return reply{}, true, errReaperGone
		}
	}
	r, err = rc.read()
	if err != nil || (r.kind != msgStarted && r.kind != msgFailed) {
		return reply{}, true, errReaperGone
	}
	return r, true, nil
}

// guardSelf asks the reaper to put itself under the metadata filter and
// serves the listener it sends back (disarmed).
func (rc *reaperConn) guardSelf() error {
	rc.conn.SetDeadline(time.Now().Add(reaperStartTimeout))
	defer rc.conn.SetDeadline(time.Time{})
	if _, err := rc.conn.Write([]byte{msgGuard}); err != nil {
		return errReaperGone
	}
	oob := make([]byte, syscall.CmsgSpace(2*4)) // room for one fd too many
	n, oobn, flags, _, err := rc.conn.ReadMsgUnix(rc.buf[:], oob)
	if err != nil {
		return errReaperGone
	}
	fds := receivedFDs(oob[:oobn])
	r, err := decodeReply(rc.buf[:n])
	switch {
	case err == nil && r.kind == msgGuarded && len(fds) == 1 && flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) == 0:
		g, err := sandbox.Serve(fds[0])
		if err != nil {
			return err
		}
		rc.guard = g
		return nil
	case err == nil && r.kind == msgFailed && len(fds) == 0:
		return syscall.Errno(r.errno)
	}
	closeFDs(fds)
	return errReaperGone
}

// read returns the reaper's next message.
func (rc *reaperConn) read() (reply, error) {
	n, oobn, flags, _, err := rc.conn.ReadMsgUnix(rc.buf[:], nil)
	if err != nil || n == 0 || oobn != 0 || flags&syscall.MSG_TRUNC != 0 {
		return reply{}, errReaperGone
	}
	return decodeReply(rc.buf[:n])
}

// signal sends a terminate or kill message. A failure needs no handling:
// the reaper is then gone, and so is its program (parent-death signal).
func (rc *reaperConn) signal(kind byte) {
	rc.conn.Write([]byte{kind})
}

// kill kills the reaper process (its child dies with it). It is only
// called before the reaper is reaped (stop), so the pid is still its own.
func (rc *reaperConn) kill() { rc.cmd.Process.Kill() }

// stop closes the socket, which makes the reaper stop its program (if
// any), sweep, and exit; it waits for that, bounded by reaperStopWait,
// and kills the reaper after.
func (rc *reaperConn) stop() {
	rc.conn.Close()
	done := make(chan struct{})
	go func() {
		rc.cmd.Wait()
		close(done)
	}()
	t := time.NewTimer(reaperStopWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		rc.cmd.Process.Kill()
		<-done
	}
	// A program's descendant that outlived its reaper stays under the
	// filter: from now on its metadata calls fail.
	if rc.guard != nil {
		rc.guard.Close()
	}
}

// guarded reports whether the reaper starts sandboxed programs.
func (rc *reaperConn) guarded() bool { return rc.guard != nil }

// disarm ends what a guarded reaper's guard serves: its program and all
// that program started are gone, or the reaper is about to be stopped.
func (rc *reaperConn) disarm() {
	if rc.guard != nil {
		rc.guard.Disarm()
	}
}

// spawn starts req under one of the pool's reapers with files as its
// stdin, stdout and stderr, in inv's cgroup when inv is set (a sandboxed
// req only; out is then the read end of its stdout). It returns the reaper, now busy with the child, and the
// child's pid. An idle reaper that has died meanwhile is replaced once by
// a fresh one.
func (pl *ReaperPool) spawn(req spawnRequest, files [3]*os.File, prog *os.File, inv *invocation, out *os.File) (*reaperConn, int, error) {
	key := "" // the Key of the request's Shared
	if req.sandbox != nil {
		key = req.sandbox.Shared.Key()
	}
	// The short form (the Shared by its key), checked as the whole; it is
	// the message for every reaper that holds that Shared already.
	short, ok := req.encode(key)
	if !ok {
		return nil, 0, &StartError{Reason: "arguments and environment too large"}
	}
	guarded := req.sandbox != nil
	for {
		rc, open := pl.take(guarded)
		if !open {
			return nil, 0, &StartError{Reason: "reaper pool closed"}
		}
		fresh := rc == nil
		if fresh {
			var err error
			if rc, err = startReaper(pl.exe); err != nil {
				return nil, 0, err
			}
			if guarded {
				if err := rc.guardSelf(); err != nil {
					rc.stop()
					return nil, 0, startError("guard reaper", err)
				}
			}
		}
		if guarded {
			// Armed before the program can make its first call.
			if err := rc.guard.Arm(req.sandbox); err != nil {
				pl.put(rc)
				return nil, 0, &StartError{Reason: "sandbox", Err: err}
			}
		}
		msg := short
		if rc.shared != key {
			msg, _ = req.encode(rc.shared)
		}
		r, sent, err := rc.spawn(msg, files, prog, inv, out)
		if err == nil && guarded {
			rc.shared = key // the reaper holds it now, whether the start failed or not
		}
		if err != nil {
			rc.stop()
			if fresh || sent && inv != nil { // the files are gone with the message
				return nil, 0, &StartError{Reason: "reaper failed"}
			}
			continue // a stale idle reaper; the next one may be fresh
		}
		if r.kind == msgFailed {
			rc.disarm()
			pl.put(rc)
			return nil, 0, &StartError{Reason: stepNames[r.step], Err: syscall.Errno(r.errno)}
		}
		return rc, r.pid, nil
	}
}

package supervise

import (
	"os"
	"syscall"
)

// childPipe returns one of a child's standard pipes: the parent's end
// (the read end when parentReads) non-blocking and served by the
// runtime's poller, the child's end blocking and never registered with
// it. os.Pipe would register both ends, and handing the child's end to a
// child would switch it back to blocking and deregister it again.
func childPipe(parentReads bool) (parent, child *os.File, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	p, c := fds[1], fds[0]
	if parentReads {
		p, c = fds[0], fds[1]
	}
	if err := syscall.SetNonblock(p, true); err != nil {
		syscall.Close(p)
		syscall.Close(c)
		return nil, nil, err
	}
	return os.NewFile(uintptr(p), "|parent"), os.NewFile(uintptr(c), "|child"), nil
}

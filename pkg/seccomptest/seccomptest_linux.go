package seccomptest

import (
	"runtime"
	"syscall"
	"unsafe"
)

// RefuseSeccomp sets no_new_privs on the calling thread and installs a
// filter answering EPERM to seccomp(2): on the calling thread alone (and
// what it starts), or with allThreads on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC). The caller of the one-thread form must
// have locked its goroutine to the thread and never unlock it.
func RefuseSeccomp(allThreads bool) error {
	nr := uint32(317) // amd64
	if runtime.GOARCH == "arm64" {
		nr = 277
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, 38, 1, 0, 0, 0, 0); e != 0 { // PR_SET_NO_NEW_PRIVS
		return e
	}
	// ld nr; jeq seccomp ? errno(EPERM) : allow
	ins := [4]struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}{{0x20, 0, 0, 0}, {0x15, 0, 1, nr}, {0x06, 0, 0, 0x00050000 | uint32(syscall.EPERM)}, {0x06, 0, 0, 0x7fff0000}}
	prog := struct {
		n   uint16
		ins unsafe.Pointer
	}{4, unsafe.Pointer(&ins[0])}
	const setModeFilter = 1
	var flags uintptr
	if allThreads {
		flags = 1 // SECCOMP_FILTER_FLAG_TSYNC
	}
	r, _, e := syscall.RawSyscall(uintptr(nr), setModeFilter, flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(&ins)
	if e != 0 {
		return e
	}
	if r != 0 {
		return syscall.EBUSY // TSYNC: a thread could not be synchronised
	}
	return nil
}

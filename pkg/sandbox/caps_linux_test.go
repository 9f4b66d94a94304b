//go:build linux && (amd64 || arm64)

package sandbox

import (
	"encoding/binary"
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// refuseCapset puts the calling thread alone under a filter that answers
// capset EPERM, as the installed Worker unit's SystemCallFilter=~@privileged
// does.
func refuseCapset() error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return e
	}
	const (
		ldAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
		jeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
		retK   = 0x06 // BPF_RET | BPF_K
		errno  = 0x00050000
		allow  = 0x7fff0000
		nrOffs = 0 // seccomp_data.nr
	)
	ins := []sockFilter{
		{code: ldAbs, k: nrOffs},
		{code: jeqK, jt: 0, jf: 1, k: syscall.SYS_CAPSET},
		{code: retK, k: errno | uint32(syscall.EPERM)},
		{code: retK, k: allow},
	}
	var prog [16]byte // struct sock_fprog
	binary.NativeEndian.PutUint16(prog[0:], uint16(len(ins)))
	binary.NativeEndian.PutUint64(prog[8:], uint64(uintptr(unsafe.Pointer(&ins[0]))))
	_, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, 0, uintptr(unsafe.Pointer(&prog[0])))
	runtime.KeepAlive(ins)
	if e != 0 {
		return e
	}
	return nil
}

// onThread runs f on a thread of its own, which is discarded afterwards
// (its capabilities and filter go with it).
func onThread(f func() error) error {
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		res <- f()
	}()
	return <-res
}

// TestNoCapabilityNeedsNoCapset: a thread that holds no capability is
// ready without capset, which the installed Worker unit refuses (every
// sandboxed start there failed); one that holds some still fails closed
// when capset is refused.
func TestNoCapabilityNeedsNoCapset(t *testing.T) {
	err := onThread(func() error {
		if err := dropCapabilities(); err != nil { // a root test: none left first
			return err
		}
		if err := refuseCapset(); err != nil {
			return err
		}
		return dropCapabilities()
	})
	if err != nil {
		t.Fatalf("a thread without capabilities, capset refused: %v, want nil", err)
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the refusal of a thread holding capabilities needs root")
		}
		return
	}
	err = onThread(func() error {
		if err := refuseCapset(); err != nil {
			return err
		}
		return dropCapabilities()
	})
	if err != syscall.EPERM {
		t.Fatalf("root's thread, capset refused: %v, want EPERM", err)
	}
}

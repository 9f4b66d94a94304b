package sandbox

import (
	"syscall"
	"unsafe"
)

// Capabilities (linux/prctl.h, linux/capability.h, linux/securebits.h).
const (
	prCapBSetRead        = 23
	prCapBSetDrop        = 24
	prSetSecurebits      = 28
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	capSetPCap           = 8
	capVersion3          = 0x20080522 // _LINUX_CAPABILITY_VERSION_3
	// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE
	// and the locks of those and of SECBIT_KEEP_CAPS (left off).
	securebitsLocked = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7
	maxCap           = 63
)

// dropCapabilities leaves the calling thread, and whatever it starts,
// with no capability at all: with CAP_SETPCAP (a Worker running as root)
// it empties the bounding set and locks the securebits that would give
// uid 0 capabilities again at an exec (SECBIT_NOROOT) or on a setuid
// (SECBIT_NO_SETUID_FIXUP), then it clears the ambient set and sets the
// effective, permitted and inheritable sets to nothing (no capset when
// they hold nothing already). Without
// CAP_SETPCAP the bounding set stays as it is, which grants nothing
// under no_new_privs (no file capability or set-user-ID bit is honoured
// at an exec) with an empty permitted set. It checks the result and
// fails (EPERM) when a capability is left.
func dropCapabilities() error {
	caps, err := capGet()
	if err != nil {
		return err
	}
	if caps[0]&(1<<capSetPCap) != 0 {
		for c := uintptr(0); c <= maxCap; c++ {
			if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapBSetDrop, c, 0, 0, 0, 0); e == syscall.EINVAL {
				break // past the kernel's last capability
			} else if e != 0 {
				return e
			}
		}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSecurebits, securebitsLocked, 0, 0, 0, 0); e != 0 {
			return e
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		return e // EINVAL: a kernel before ambient capabilities (4.3)
	}
	if caps == ([3]uint64{}) {
		// Nothing to clear (the ambient set is within the permitted
		// one), and capset may be refused: the installed Worker unit
		// holds no capability and its SystemCallFilter=~@privileged
		// answers capset EPERM.
		return nil
	}
	hdr := [2]uint32{capVersion3, 0}
	var data [6]uint32 // two struct __user_cap_data_struct, all zero
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr[0])), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	if caps, err = capGet(); err != nil {
		return err
	}
	for _, c := range caps {
		if c != 0 {
			return syscall.EPERM
		}
	}
	return nil
}

// capGet returns the thread's effective, permitted and inheritable sets
// (in that order, 64 bits each).
func capGet() ([3]uint64, error) {
	hdr := [2]uint32{capVersion3, 0}
	var data [6]uint32 // {effective, permitted, inheritable} for bits 0-31, then 32-63
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr[0])), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return [3]uint64{}, e
	}
	var out [3]uint64
	for i := range out {
		out[i] = uint64(data[i]) | uint64(data[3+i])<<32
	}
	return out, nil
}

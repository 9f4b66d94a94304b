//go:build linux && (amd64 || arm64)

package sandbox

import "syscall"

// GuardThread installs the metadata filter on the calling thread alone
// (no_new_privs set first) and returns its listener: a test serves it
// from its own process, whose other threads stay unfiltered.
func GuardThread() (int, error) {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return -1, e
	}
	return installMetaFilter(false)
}

// DecodeSockaddr is decodeSockaddr, for the fuzz test.
var DecodeSockaddr = decodeSockaddr

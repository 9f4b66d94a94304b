package main

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// lowPath holds the path for the i386 call: the binary (not position
// independent) lies below 4 GiB, where a 32-bit pointer reaches it.
var lowPath [4096]byte

// int80 makes system call trap through the i386 table (int 0x80).
func int80(trap, a1, a2, a3 uintptr) uintptr

// foreignChmod tries chmod through the i386 table (in a child) and the x32
// table.
func foreignChmod(p string, mode uint32) map[string]bool {
	const x32Chmod = 0x40000000 + 90
	b, _ := syscall.BytePtrFromString(p)
	_, _, e := syscall.Syscall(x32Chmod, uintptr(unsafe.Pointer(b)), uintptr(mode), 0)
	return map[string]bool{"meta-i386": int80Child(p, mode), "meta-x32": e == 0}
}

// int80Main is "int80 PATH MODE": chmod through the i386 table; prints ok
// when it succeeded.
func int80Main(args []string) {
	if len(args) != 2 || len(args[0]) >= len(lowPath) {
		os.Exit(2)
	}
	mode, err := strconv.ParseUint(args[1], 8, 32)
	if err != nil {
		os.Exit(2)
	}
	copy(lowPath[:], args[0])
	addr := uintptr(unsafe.Pointer(&lowPath[0]))
	if addr>>32 != 0 {
		os.Exit(3) // a position-independent build: the pointer does not fit
	}
	const i386Chmod = 15
	if r := int80(i386Chmod, addr, uintptr(mode), 0); r == 0 {
		os.Stdout.WriteString("ok\n")
	}
	os.Exit(0)
}

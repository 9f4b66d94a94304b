package main

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// lowPath holds the path for the i386 call: the binary (not position
// independent) lies below 4 GiB, where a 32-bit pointer reaches it.
var lowPath [4096]byte

// int80 makes system call trap through the i386 table (int 0x80).
func int80(trap, a1, a2, a3 uintptr) uintptr

// foreignKinds are the foreign tables amd64 has: i386 and x32.
func foreignKinds() []string { return []string{"meta-i386", "meta-x32"} }

// foreignMain is "foreign MODE PATH...": chmod of each PATH to its MODE
// through the i386 table (int 0x80) and the x32 table, each on a thread
// of its own and bounded in time; prints "KIND INDEX" for each that
// succeeded.
func foreignMain(args []string) {
	for i := 0; i+1 < len(args); i += 2 {
		mode, err := strconv.ParseUint(args[i], 8, 32)
		p := args[i+1]
		if err != nil || len(p) >= len(lowPath) {
			continue
		}
		idx := strconv.Itoa(i / 2)
		if onThread(func() bool {
			clear(lowPath[:])
			copy(lowPath[:], p)
			addr := uintptr(unsafe.Pointer(&lowPath[0]))
			const i386Chmod = 15
			return addr>>32 == 0 && int80(i386Chmod, addr, uintptr(mode), 0) == 0
		}) {
			os.Stdout.WriteString("meta-i386 " + idx + "\n")
		}
		if onThread(func() bool {
			const x32Chmod = 0x40000000 + 90
			b, _ := syscall.BytePtrFromString(p)
			_, _, e := syscall.Syscall(x32Chmod, uintptr(unsafe.Pointer(b)), uintptr(mode), 0)
			return e == 0
		}) {
			os.Stdout.WriteString("meta-x32 " + idx + "\n")
		}
	}
	os.Exit(0)
}

// onThread runs f on a locked thread of its own and waits for it a little: a
// killed thread takes only its goroutine.
func onThread(f func() bool) bool {
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		done <- f()
	}()
	select {
	case ok := <-done:
		return ok
	case <-time.After(300 * time.Millisecond):
		return false
	}
}

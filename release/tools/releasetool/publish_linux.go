//go:build linux && (amd64 || arm64)

package main

import (
	"errors"
	"syscall"
	"unsafe"
)

// renameNoReplace is RENAME_NOREPLACE from <linux/fs.h>.
const renameNoReplace = 1

// atFDCWD is AT_FDCWD: resolve relative paths against the working directory.
const atFDCWD = -100

// publish atomically renames from to to, failing if to exists in any form.
// The syscall package has no renameat2 wrapper, so the raw system call is
// used; its number is per architecture (sysRenameat2).
func publish(from, to string) error {
	fromPtr, err := syscall.BytePtrFromString(from)
	if err != nil {
		return errors.New("invalid staging path")
	}
	toPtr, err := syscall.BytePtrFromString(to)
	if err != nil {
		return errors.New("invalid destination path")
	}
	fd := atFDCWD
	_, _, errno := syscall.Syscall6(sysRenameat2,
		uintptr(fd), uintptr(unsafe.Pointer(fromPtr)),
		uintptr(fd), uintptr(unsafe.Pointer(toPtr)),
		renameNoReplace, 0)
	switch errno {
	case 0:
		return nil
	case syscall.EEXIST:
		return errors.New("destination already exists; nothing was replaced")
	case syscall.EXDEV:
		return errors.New("staging and destination are on different filesystems")
	case syscall.ENOSYS, syscall.EINVAL:
		return errors.New("the kernel or filesystem does not support renameat2 RENAME_NOREPLACE")
	default:
		return errors.New("renameat2 failed: " + errno.Error())
	}
}

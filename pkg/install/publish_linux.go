//go:build linux && (amd64 || arm64)

package install

import (
	"errors"
	"syscall"
	"unsafe"
)

const renameNoReplaceFlag = 1 // RENAME_NOREPLACE

// renameat2 is the raw system call (a variable so that tests can stand in
// a filesystem that lacks the flag).
var renameat2 = func(from, to *byte) syscall.Errno {
	atFDCWD := -100
	_, _, errno := syscall.Syscall6(sysRenameat2, uintptr(atFDCWD), uintptr(unsafe.Pointer(from)),
		uintptr(atFDCWD), uintptr(unsafe.Pointer(to)), renameNoReplaceFlag, 0)
	return errno
}

// renameNoReplace is renameat2(AT_FDCWD, from, AT_FDCWD, to,
// RENAME_NOREPLACE). EINVAL (a filesystem without the flag) is a refusal,
// never a fallback to rename.
func renameNoReplace(from, to string) error {
	f, err := syscall.BytePtrFromString(from)
	if err != nil {
		return err
	}
	t, err := syscall.BytePtrFromString(to)
	if err != nil {
		return err
	}
	switch errno := renameat2(f, t); errno {
	case 0:
		return nil
	case syscall.EEXIST:
		return errors.New("destination already exists")
	case syscall.EINVAL, syscall.ENOSYS:
		return errors.New("the filesystem does not support renameat2 RENAME_NOREPLACE")
	default:
		return errno
	}
}

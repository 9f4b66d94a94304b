package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// probeGuard tries what the metadata guard refuses beyond the plain
// calls of probeMeta (docs/sandbox.md, "File metadata: the guard"):
//
//   - meta-uring-xattr, meta-uring-acl: an extended attribute, and a POSIX
//     ACL that is an effective chmod adding group and other read and
//     write (0600 becomes 0666), on every file it was told about, through
//     an io_uring (IORING_OP_SETXATTR: the kernel runs it without any
//     seccomp filter); each undone after;
//   - meta-setuid, meta-setgid: chmod u+s and g+s of a file it made in its
//     own directory, by chmod, fchmod and fchmodat;
//   - meta-root: chmod, chown and utimes (to what they are) of its own
//     roots: the directory holding its workspace, its run directory (a
//     plugin) or private directory (a check), its static worktree's git
//     administrative directory;
//   - meta-verity, meta-fscrypt: FS_IOC_ENABLE_VERITY on every file it can
//     open for reading, FS_IOC_SET_ENCRYPTION_POLICY on every directory it
//     can (and on a file and an empty directory of its own). The try
//     counts when the ioctl got past the sandbox to the filesystem: any
//     answer but EPERM, the filter's (the test's filesystems have neither
//     feature, so even unconfined the ioctl itself fails).
func (a *agent) probeGuard(dir string, writeDirs []string) {
	files := dedup(append(dedup(a.targets), repositoryFiles(dir)...))
	for _, p := range files {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		ok := uringSetxattr(p, "user.forge-hostile", []byte("1")) == nil
		if ok {
			syscall.Removexattr(p, "user.forge-hostile")
		}
		a.add("meta-uring-xattr", p, ok, nil)
		mode := st.Mode & 0o777
		ok = uringSetxattr(p, "system.posix_acl_access", minimalACL(mode|0o066)) == nil
		if ok {
			uringSetxattr(p, "system.posix_acl_access", minimalACL(mode))
			syscall.Chmod(p, st.Mode&0o7777)
		}
		a.add("meta-uring-acl", p, ok, nil)
	}
	own := filepath.Join(dir, "guard-"+strconv.Itoa(a.self))
	if os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755) == nil {
		a.add("meta-setuid", own+" chmod", syscall.Chmod(own, 0o4755) == nil, nil)
		a.add("meta-setgid", own+" chmod", syscall.Chmod(own, 0o2755) == nil, nil)
		if fd, err := syscall.Open(own, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
			a.add("meta-setuid", own+" fchmod", syscall.Fchmod(fd, 0o4755) == nil, nil)
			syscall.Close(fd)
		}
		a.add("meta-setuid", own+" fchmodat", syscall.Fchmodat(-100, own, 0o6755, 0) == nil, nil)
		files = append(files, own)
	}
	empty := filepath.Join(dir, "guard-dir-"+strconv.Itoa(a.self))
	var dirs []string
	if os.Mkdir(empty, 0o700) == nil {
		dirs = append(dirs, empty)
	}
	for _, p := range files {
		if fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0); err == nil {
			var arg [128]byte // struct fsverity_enable_arg: version 1, SHA-256, 4096-byte blocks
			binary.NativeEndian.PutUint32(arg[0:], 1)
			binary.NativeEndian.PutUint32(arg[4:], 1)
			binary.NativeEndian.PutUint32(arg[8:], 4096)
			_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), 0x40806685, uintptr(unsafe.Pointer(&arg[0])))
			a.add("meta-verity", p, e != syscall.EPERM, nil)
			syscall.Close(fd)
		}
	}
	for _, p := range append(dirs, writeDirs...) {
		if fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
			policy := [12]byte{0, 1, 4, 0} // struct fscrypt_policy_v1: AES-256-XTS, AES-256-CTS
			_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), 0x800c6613, uintptr(unsafe.Pointer(&policy[0])))
			a.add("meta-fscrypt", p, e != syscall.EPERM, nil)
			syscall.Close(fd)
		}
	}
	os.Remove(own)
	os.Remove(empty)
	for _, p := range a.roots(dir) {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			continue
		}
		a.add("meta-root", p+" chmod", syscall.Chmod(p, st.Mode&0o7777) == nil, nil)
		a.add("meta-root", p+" chown", syscall.Lchown(p, -1, -1) == nil, nil)
		at, mt := time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix())
		a.add("meta-root", p+" utimes", os.Chtimes(p, at, mt) == nil, nil)
	}
}

// roots are the directories the sandbox grants it read-write as a whole,
// as far as it can tell: the one holding its workspace, its run directory
// (a plugin's working directory) or private directory (the parent of a
// check's TMPDIR), and a static worktree's administrative directory (from
// the workspace's .git file).
func (a *agent) roots(dir string) []string {
	out := []string{filepath.Dir(dir)}
	if a.who == "plugin" {
		out = append(out, mustWD())
	} else if t := os.Getenv("TMPDIR"); filepath.IsAbs(t) {
		out = append(out, filepath.Dir(t))
	}
	if admin, ok := gitdirOf(dir); ok && a.layout == "" {
		out = append(out, admin)
	}
	return dedup(out)
}

// gitdirOf reads the worktree's .git file: the gitdir it names.
func gitdirOf(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", false
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	return p, ok && filepath.IsAbs(p)
}

// minimalACL is the POSIX ACL attribute (version 2) that is exactly the
// permission bits mode: owner, group and other entries.
func minimalACL(mode uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range [][2]uint32{{0x01, mode >> 6 & 7}, {0x04, mode >> 3 & 7}, {0x20, mode & 7}} {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// io_uring, as uringSetxattr uses it (the same numbers on amd64 and
// arm64).
const (
	sysIoUringSetup  = 425
	sysIoUringEnter  = 426
	opSetxattr       = 42 // IORING_OP_SETXATTR
	offSQRing        = 0
	offCQRing        = 0x8000000
	offSQEs          = 0x10000000
	enterGetEvents   = 1
	uringParamsBytes = 120
)

// uringSetxattr sets the attribute name to value on path through a ring
// of its own: one IORING_OP_SETXATTR submitted and waited for.
func uringSetxattr(path, name string, value []byte) error {
	var params [uringParamsBytes]byte
	fd, _, e := syscall.Syscall(sysIoUringSetup, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if e != 0 {
		return e
	}
	defer syscall.Close(int(fd))
	u32 := func(off int) int { return int(binary.NativeEndian.Uint32(params[off:])) }
	sqEntries, cqEntries := u32(0), u32(4)
	sqTail, sqMask, sqArray := u32(44), u32(48), u32(64) // struct io_sqring_offsets at 40
	cqHead, cqTail, cqMask, cqes := u32(80), u32(84), u32(88), u32(100)
	prot, flags := syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE
	sq, err := syscall.Mmap(int(fd), offSQRing, sqArray+4*sqEntries, prot, flags)
	if err != nil {
		return err
	}
	defer syscall.Munmap(sq)
	cq, err := syscall.Mmap(int(fd), offCQRing, cqes+16*cqEntries, prot, flags)
	if err != nil {
		return err
	}
	defer syscall.Munmap(cq)
	sqes, err := syscall.Mmap(int(fd), offSQEs, 64*sqEntries, prot, flags)
	if err != nil {
		return err
	}
	defer syscall.Munmap(sqes)
	p, err1 := syscall.BytePtrFromString(path)
	n, err2 := syscall.BytePtrFromString(name)
	if err1 != nil || err2 != nil || len(value) == 0 {
		return syscall.EINVAL
	}
	sqe := sqes[:64]
	clear(sqe)
	sqe[0] = opSetxattr
	binary.NativeEndian.PutUint64(sqe[8:], uint64(uintptr(unsafe.Pointer(&value[0])))) // addr2: the value
	binary.NativeEndian.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(n))))        // addr: the name
	binary.NativeEndian.PutUint32(sqe[24:], uint32(len(value)))                        // len
	binary.NativeEndian.PutUint64(sqe[48:], uint64(uintptr(unsafe.Pointer(p))))        // addr3: the path
	tail := (*uint32)(unsafe.Pointer(&sq[sqTail]))
	t := atomic.LoadUint32(tail)
	mask := *(*uint32)(unsafe.Pointer(&sq[sqMask]))
	binary.NativeEndian.PutUint32(sq[sqArray+4*int(t&mask):], 0)
	atomic.StoreUint32(tail, t+1)
	_, _, e = syscall.Syscall6(sysIoUringEnter, fd, 1, 1, enterGetEvents, 0, 0)
	runtime.KeepAlive(p)
	runtime.KeepAlive(n)
	runtime.KeepAlive(value)
	if e != 0 {
		return e
	}
	head := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cq[cqHead])))
	if atomic.LoadUint32((*uint32)(unsafe.Pointer(&cq[cqTail]))) == head {
		return syscall.EAGAIN
	}
	cm := *(*uint32)(unsafe.Pointer(&cq[cqMask]))
	res := int32(binary.NativeEndian.Uint32(cq[cqes+16*int(head&cm)+8:]))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&cq[cqHead])), head+1)
	if res < 0 {
		return syscall.Errno(-res)
	}
	return nil
}

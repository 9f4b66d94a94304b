//go:build linux && (amd64 || arm64)

package sandbox_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// refuseEnv makes the test binary run refuseTries: the calls the guard
// refuses even inside the workspace, and those that get around it.
const refuseEnv = "FORGE_SANDBOX_REFUSE"

func init() { testModes[refuseEnv] = refuseTries }

// refuseTries makes each call and prints NAME=ok or NAME=<errno number>.
// WS is the program's read-write tree (holding f and d), OUT an outside
// file and OUTDIR an empty outside directory, both owned by the caller.
func refuseTries() {
	ws, out, outDir := os.Getenv("WS"), os.Getenv("OUT"), os.Getenv("OUTDIR")
	f := filepath.Join(ws, "f")
	say := func(name string, e error) {
		v := "ok"
		if e != nil {
			n, _ := e.(syscall.Errno)
			v = strconv.Itoa(int(n))
		}
		os.Stdout.WriteString(name + "=" + v + "\n")
	}
	errno := func(e syscall.Errno) error {
		if e == 0 {
			return nil
		}
		return e
	}
	ioctl := func(fd int, cmd uintptr, arg unsafe.Pointer) error {
		_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), cmd, uintptr(arg))
		return errno(e)
	}
	var params [120]byte // struct io_uring_params
	fd, _, e := syscall.Syscall(425, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	if e == 0 {
		syscall.Close(int(fd))
	}
	say("uring-setup", errno(e))
	_, _, e = syscall.Syscall6(427, ^uintptr(0), 0, 0, 0, 0, 0) // io_uring_register on no ring: EBADF when it runs
	say("uring-register", errno(e))
	_, _, e = syscall.Syscall(435, 0, 0, 0) // clone3 with no arguments: EINVAL when it runs
	say("clone3", errno(e))
	if fd, err := syscall.Open(out, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
		var verity [128]byte // struct fsverity_enable_arg: version 1, SHA-256, 4096-byte blocks
		binary.NativeEndian.PutUint32(verity[0:], 1)
		binary.NativeEndian.PutUint32(verity[4:], 1)
		binary.NativeEndian.PutUint32(verity[8:], 4096)
		say("verity", ioctl(fd, 0x40806685, unsafe.Pointer(&verity[0])))
		var flags uint64
		ioctl(fd, 0x80086601, unsafe.Pointer(&flags)) // FS_IOC_GETFLAGS: allowed
		say("setflags", ioctl(fd, 0x40086602, unsafe.Pointer(&flags)))
		var label [256]byte
		say("fslabel", ioctl(fd, 0x81009431, unsafe.Pointer(&label[0]))) // FS_IOC_GETFSLABEL: not allowed
		syscall.Close(fd)
	}
	if fd, err := syscall.Open(outDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		policy := [12]byte{0, 1, 4, 0} // struct fscrypt_policy_v1: AES-256-XTS, AES-256-CTS
		say("fscrypt", ioctl(fd, 0x800c6613, unsafe.Pointer(&policy[0])))
		syscall.Close(fd)
	}
	var p [2]int
	if syscall.Pipe2(p[:], syscall.O_CLOEXEC) == nil {
		var n int32
		say("fionread", ioctl(p[0], syscall.TIOCINQ, unsafe.Pointer(&n)))
		say("fioclex", ioctl(p[0], 0x5451, nil))
	}
	say("chmod-plain", syscall.Chmod(f, 0o755))
	say("chmod-setuid", syscall.Chmod(f, 0o4755))
	say("chmod-setgid", syscall.Chmod(f, 0o2755))
	if fd, err := syscall.Open(f, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
		say("fchmod-setuid", syscall.Fchmod(fd, 0o4755))
		syscall.Close(fd)
	}
	say("fchmodat-setuid", syscall.Fchmodat(atFDCWD, f, 0o6755, 0))
	say("chmod-subdir", syscall.Chmod(filepath.Join(ws, "d"), 0o700))
	say("chmod-root", syscall.Chmod(ws, 0o777))
	say("chown-root", syscall.Lchown(ws, -1, -1))
	_, _, e = syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(atFDCWDu), uintptr(unsafe.Pointer(mustBytes(ws))), 0, 0, 0, 0)
	say("utimes-root", errno(e))
	say("xattr-root", syscall.Setxattr(ws, "user.forge", []byte("1"), 0))
	say("xattr-user", syscall.Setxattr(f, "user.forge", []byte("1"), 0))
	say("xattr-security", syscall.Setxattr(f, "security.forge", []byte("1"), 0))
	say("xattr-trusted", syscall.Setxattr(f, "trusted.forge", []byte("1"), 0))
	say("acl", syscall.Setxattr(f, "system.posix_acl_access", minimalACL(0o644), 0))
}

const atFDCWD = -100

var atFDCWDu = func() uintptr { v := int64(atFDCWD); return uintptr(v) }()

func mustBytes(s string) *byte {
	b, err := syscall.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// minimalACL is the POSIX ACL xattr (version 2) that is exactly the
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

// The guard refuses, even inside its read-write tree, what no program
// needs there: set-user-ID and set-group-ID bits by every chmod form, any
// change of the tree's root itself, security.* and trusted.* attributes;
// the filter refuses io_uring (whose operations would never reach the
// guard) and clone3 (whose CLONE_INTO_CGROUP would leave the program's
// cgroup), the inode ioctls (fs-verity, fscrypt, chattr: EPERM) and every
// ioctl it does not list (ENOTTY), and lets the listed ones through.
func TestGuardRefusals(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws, outDir := t.TempDir(), t.TempDir()
	if err := os.Chmod(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(filepath.Join(ws, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &sandbox.Policy{}
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", "/sys", exe, out, outDir} {
		p.Rules = append(p.Rules, sandbox.Rule{Path: d, Access: sandbox.ReadOnly, Optional: true})
	}
	p.Rules = append(p.Rules, sandbox.Rule{Path: "/dev/null", Access: sandbox.Device}, sandbox.Rule{Path: ws, Access: sandbox.ReadWrite})
	env := []string{refuseEnv + "=1", "WS=" + ws, "OUT=" + out, "OUTDIR=" + outDir}
	got := fromLockedThread(t, func() (func(), error) {
		if _, err := sandbox.RestrictThread(p, nil); err != nil {
			return nil, err
		}
		g, err := guardThread(p)
		if err != nil {
			return nil, err
		}
		return g.Close, nil
	}, exe, []string{exe}, env)
	res := map[string]string{}
	for _, line := range strings.Fields(got) {
		k, v, _ := strings.Cut(line, "=")
		res[k] = v
	}
	n := func(e syscall.Errno) string { return strconv.Itoa(int(e)) }
	want := map[string]string{
		"uring-setup": n(syscall.ENOSYS), "uring-register": n(syscall.ENOSYS), "clone3": n(syscall.ENOSYS),
		"verity": n(syscall.EPERM), "setflags": n(syscall.EPERM), "fscrypt": n(syscall.EPERM), "fslabel": n(syscall.ENOTTY),
		"fionread": "ok", "fioclex": "ok",
		"chmod-plain": "ok", "chmod-setuid": n(syscall.EPERM), "chmod-setgid": n(syscall.EPERM),
		"fchmod-setuid": n(syscall.EPERM), "fchmodat-setuid": n(syscall.EPERM), "chmod-subdir": "ok",
		"chmod-root": n(syscall.EPERM), "chown-root": n(syscall.EPERM), "utimes-root": n(syscall.EPERM), "xattr-root": n(syscall.EPERM),
		"xattr-user": "ok", "xattr-security": n(syscall.EPERM), "xattr-trusted": n(syscall.EPERM), "acl": "ok",
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s = %q, want %q", k, res[k], v)
		}
	}
	if st, err := os.Stat(filepath.Join(ws, "f")); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || st.Mode().Perm() != 0o644 {
		t.Errorf("f: %v %v, want 0644 without set-id bits (the ACL set last)", st.Mode(), err)
	}
	if st, err := os.Stat(ws); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the root: %v %v, want 0700 still", st.Mode(), err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
}

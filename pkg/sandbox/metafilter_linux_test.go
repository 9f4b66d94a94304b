//go:build linux && (amd64 || arm64)

package sandbox

import (
	"syscall"
	"testing"
)

// runFilter runs the filter's classic BPF (the instructions it uses) on
// one call's struct seccomp_data: arch, number and the low half of the
// second argument.
func runFilter(t *testing.T, prog []sockFilter, arch, nr, arg1 uint32) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.code {
		case bpfLdAbsW:
			switch in.k {
			case dataNr:
				acc = nr
			case dataArch:
				acc = arch
			case dataArg1L:
				acc = arg1
			default:
				t.Fatalf("load of offset %d", in.k)
			}
		case bpfJeqK, bpfJgtK, bpfJgeK:
			ok := acc == in.k
			if in.code == bpfJgtK {
				ok = acc > in.k
			} else if in.code == bpfJgeK {
				ok = acc >= in.k
			}
			if ok {
				pc += int(in.jt)
			} else {
				pc += int(in.jf)
			}
		case bpfRetK:
			return in.k
		default:
			t.Fatalf("instruction %#x", in.code)
		}
	}
	t.Fatal("the filter ran off its end")
	return 0
}

// Every allowed ioctl range passes at both ends and is refused just
// outside them (unless a neighbour range is allowed), the metadata ioctls
// are EPERM, any other command ENOTTY; io_uring is ENOSYS; the served
// calls notify; compat calls are ENOSYS and other architectures killed.
func TestMetaFilterDecisions(t *testing.T) {
	prog := metaFilter()
	if len(prog) > 4096 {
		t.Fatalf("%d instructions (BPF_MAXINSNS is 4096)", len(prog))
	}
	allowed := func(cmd uint32) bool {
		for _, r := range ioctlAllowed {
			if cmd >= r[0] && cmd <= r[1] {
				return true
			}
		}
		return false
	}
	metadata := map[uint32]bool{}
	for _, cmd := range ioctlMetadata {
		metadata[cmd] = true
	}
	enotty, eperm, enosys := retErrno|uint32(syscall.ENOTTY), retErrno|uint32(syscall.EPERM), retErrno|uint32(syscall.ENOSYS)
	ioctlWant := func(cmd uint32) uint32 {
		switch {
		case allowed(cmd):
			return retAllow
		case metadata[cmd]:
			return eperm
		}
		return enotty
	}
	var cmds []uint32
	for _, r := range ioctlAllowed {
		cmds = append(cmds, r[0]-1, r[0], r[1], r[1]+1)
	}
	for _, c := range ioctlMetadata {
		cmds = append(cmds, c-1, c, c+1)
	}
	cmds = append(cmds, 0, 0x5412 /* TIOCSTI */, 0x541c /* TIOCLINUX */, 0x5423 /* TIOCSETD */, 0xffffffff)
	for _, cmd := range cmds {
		if got, want := runFilter(t, prog, auditArchNative, sysIoctlNative, cmd), ioctlWant(cmd); got != want {
			t.Errorf("ioctl %#x: %#x, want %#x", cmd, got, want)
		}
	}
	for _, c := range []struct {
		arch, nr, want uint32
	}{
		{auditArchNative, sysIoUringSetup, enosys},
		{auditArchNative, sysIoUringEnter, enosys},
		{auditArchNative, sysIoUringRegister, enosys},
		{auditArchNative, sysClone3, enosys},
		{auditArchNative, sysClone3 - 1, retAllow},
		{auditArchNative, sysSetxattrat, enosys},
		{auditArchNative, sysFileSetattr, eperm},
		{auditArchNative, nativeCalls[0].nr, retUserNotif},
		{auditArchNative, sysFchmodat2, retUserNotif},
		{auditArchNative, 0, retAllow},
		{auditArchNative, sysIoUringRegister + 1, retAllow},
		{auditArchCompat, 15, enosys},
		{0x12345678, 0, retKillProcess},
	} {
		if got := runFilter(t, prog, c.arch, c.nr, 0); got != c.want {
			t.Errorf("arch %#x call %d: %#x, want %#x", c.arch, c.nr, got, c.want)
		}
	}
}

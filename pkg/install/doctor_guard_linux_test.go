package install_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/doctor"
)

// noSeccompEnv marks the child of TestDoctorWithoutTheMetadataGuard that
// runs the doctor in a process whose filter refuses seccomp(2).
const noSeccompEnv = "FORGE_TEST_DOCTOR_NO_SECCOMP"

// TestDoctorWithoutTheMetadataGuard: where seccomp user notification is
// refused (an old kernel, a service manager's filter), the Worker refuses
// to start, and worker-sandbox says so; the same machine passes it with
// seccomp available (TestDoctorHealthyAndReadOnly).
func TestDoctorWithoutTheMetadataGuard(t *testing.T) {
	if os.Getenv(noSeccompEnv) == "1" {
		if err := refuseSeccompEverywhere(); err != nil {
			t.Fatalf("cannot install the refusing filter: %v", err)
		}
		e := installedMachine(t)
		code, out, errOut := runDoctor(t, e, self())
		if code != doctor.ExitUnhealthy || out != report("worker-sandbox") ||
			!strings.Contains(errOut, "metadata guard") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDoctorWithoutTheMetadataGuard$", "-test.count=1")
	cmd.Env = append(os.Environ(), noSeccompEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// refuseSeccompEverywhere installs, on every thread of this process
// (SECCOMP_FILTER_FLAG_TSYNC), a filter answering EPERM to seccomp(2).
func refuseSeccompEverywhere() error {
	nr := uint32(317) // amd64
	if runtime.GOARCH == "arm64" {
		nr = 277
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, 38, 1, 0, 0, 0, 0); e != 0 { // PR_SET_NO_NEW_PRIVS
		return e
	}
	// ld nr; jeq seccomp ? errno(EPERM) : allow
	ins := [4]struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}{{0x20, 0, 0, 0}, {0x15, 0, 1, nr}, {0x06, 0, 0, 0x00050000 | uint32(syscall.EPERM)}, {0x06, 0, 0, 0x7fff0000}}
	prog := struct {
		n   uint16
		ins unsafe.Pointer
	}{4, unsafe.Pointer(&ins[0])}
	const setModeFilter, flagTSync = 1, 1
	if r, _, e := syscall.RawSyscall(uintptr(nr), setModeFilter, flagTSync, uintptr(unsafe.Pointer(&prog))); e != 0 || r != 0 {
		if e == 0 {
			e = syscall.EBUSY // a thread could not be synchronised
		}
		return e
	}
	return nil
}

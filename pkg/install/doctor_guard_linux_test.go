package install_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/doctor"
	"github.com/0k-lab/agent-forge/pkg/seccomptest"
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
		if err := seccomptest.RefuseSeccomp(true); err != nil {
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

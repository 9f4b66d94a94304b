package sandbox_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// holderEnv makes the test binary a process that holds a secret in its
// environment, optionally makes itself non-dumpable, says "ready" and
// waits for its stdin to close.
const holderEnv = "FORGE_SANDBOX_HOLDER"

// probeEnv makes the test binary run ProbeGuard and print its outcome
// (TestProbeGuard).
const probeEnv = "FORGE_SANDBOX_PROBE"

// testModes are other modes of the test binary, by the environment
// variable that selects each (set in init by the files that have them).
var testModes = map[string]func(){}

func TestMain(m *testing.M) {
	for env, run := range testModes {
		if os.Getenv(env) != "" {
			run()
			os.Exit(0)
		}
	}
	if os.Getenv(probeEnv) != "" {
		if err := sandbox.ProbeGuard(); err != nil {
			os.Stdout.WriteString("refused: " + err.Error() + "\n")
		} else {
			os.Stdout.WriteString("ok\n")
		}
		os.Exit(0)
	}
	if mode := os.Getenv(holderEnv); mode != "" {
		if mode == "protect" && sandbox.ProtectSelf() != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("ready\n")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// unprivileged is the account both processes run as under root: root's
// CAP_SYS_PTRACE reads any process, the point is the same account.
const unprivileged = 65534

// A process of the same account reads the environment of a holder that
// did not call ProtectSelf, and not of one that did.
func TestProtectSelfHidesEnvironment(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 { // the test binary, where the other account can run it
		dir, err := os.MkdirTemp("", "sandbox-dumpable-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		exe = filepath.Join(dir, "holder")
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	asAccount := func(c *exec.Cmd) *exec.Cmd {
		if os.Geteuid() == 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivileged, Gid: unprivileged}}
		}
		return c
	}
	for _, mode := range []string{"plain", "protect"} {
		holder := asAccount(exec.Command(exe))
		holder.Env = []string{holderEnv + "=" + mode, "HELD_SECRET=s3cret-" + mode}
		in, _ := holder.StdinPipe()
		out, _ := holder.StdoutPipe()
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			t.Fatalf("%s holder: %q", mode, line)
		}
		reader := asAccount(exec.Command("/bin/cat", "/proc/"+strconv.Itoa(holder.Process.Pid)+"/environ"))
		got, err := reader.Output()
		in.Close()
		holder.Wait()
		leaked := strings.Contains(string(got), "s3cret-"+mode)
		if mode == "plain" && (err != nil || !leaked) {
			t.Fatalf("plain holder: the reader could not read its environment (%v): the test cannot fail", err)
		}
		if mode == "protect" && (err == nil || leaked) {
			t.Fatalf("non-dumpable holder: the reader read its environment")
		}
	}
}

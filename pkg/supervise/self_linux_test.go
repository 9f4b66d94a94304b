package supervise_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// selfHelperEnv makes the test binary remove its own file, then run a
// child under a reaper started from supervise.Self, and print the child's
// exit code: what a Worker does after an upgrade replaced its binary.
const selfHelperEnv = "FORGE_SUPERVISE_SELF_HELPER"

func selfHelper() int {
	exe, err := os.Executable()
	if err != nil || os.Remove(exe) != nil {
		return 1
	}
	self, err := supervise.Self()
	if err != nil {
		return 1
	}
	pl := supervise.NewReaperPool(self)
	defer pl.Close()
	res, err := supervise.Run(context.Background(), supervise.Command{Path: "/bin/sh", Args: []string{"-c", "exit 3"}, Env: []string{}, OutputLimit: 10, Reaper: pl}, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("exit", res.Exit.Code)
	return 0
}

func TestSelfStartsReapersAfterTheBinaryIsGone(t *testing.T) {
	copyPath := filepath.Join(t.TempDir(), "supervise.test")
	src, err := os.Open(self(t))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(copyPath, os.O_CREATE|os.O_WRONLY, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst.Close()
	cmd := exec.Command(copyPath, "-test.run=^$")
	cmd.Env = append(os.Environ(), selfHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "exit 3" {
		t.Fatalf("helper: %v, output %q", err, out)
	}
	if _, err := os.Stat(copyPath); !os.IsNotExist(err) {
		t.Fatal("the helper did not remove its binary; the test proves nothing")
	}
}

package supervise

import (
	"os"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// A reaper starts a sandboxed program only once it is guarded (EPERM
// before: the program's metadata calls would be ungoverned), is guarded
// once, and takes a second guard message as a broken caller.
func TestReaperGuardsBeforeSandboxedStarts(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := startReaper(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.stop()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	files := [3]*os.File{null, null, null}
	policy := &sandbox.Policy{Rules: []sandbox.Rule{{Path: "/", Access: sandbox.ReadOnly}}}
	msg, ok := spawnRequest{path: "/bin/true", dir: "/", argv: []string{"true"}, env: []string{}, sandbox: policy}.encode("")
	if !ok {
		t.Fatal("encode refused")
	}
	if r, _, err := rc.spawn(msg, files, nil, nil, nil); err != nil || r.kind != msgFailed || syscall.Errno(r.errno) != syscall.EPERM {
		t.Fatalf("sandboxed spawn, unguarded: %+v %v, want failed EPERM", r, err)
	}
	if err := rc.guardSelf(); err != nil {
		t.Fatalf("guard: %v", err)
	}
	if err := rc.guard.Arm(policy); err != nil {
		t.Fatal(err)
	}
	if r, _, err := rc.spawn(msg, files, nil, nil, nil); err != nil || r.kind != msgStarted {
		t.Fatalf("sandboxed spawn, guarded: %+v %v", r, err)
	}
	if r, err := rc.read(); err != nil || r.kind != msgExited || r.code != 0 {
		t.Fatalf("exit: %+v %v", r, err)
	}
	if err := rc.guardSelf(); err == nil {
		t.Error("a second guard message was answered")
	}
	if err := rc.cmd.Wait(); err != nil {
		t.Errorf("the reaper did not end cleanly after the broken caller: %v", err)
	}
}

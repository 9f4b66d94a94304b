package supervise_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// probeScript tries, from inside the child, each thing the sandbox must
// refuse (and one it must allow), and prints name=yes|no for each.
const probeScript = `p() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=yes"; else echo "$n=no"; fi; }
p write-workspace sh -c 'echo x > "$WS/f"'
p read-secret cat "$SECRET"
p write-outside sh -c 'echo x > "$OUT/f"'
p hardlink-out ln "$SECRET" "$WS/hard"
p symlink-out sh -c 'ln -s "$SECRET" "$WS/soft" && cat "$WS/soft"'
p environ cat /proc/$T/environ
p mem sh -c 'exec 3</proc/$T/mem'
p fd ls -l /proc/$T/fd/
p signal kill -0 $T
`

// unprivileged is the account the probes run as when the test runs as
// root: CAP_SYS_PTRACE would let root past Landlock's ptrace check, and
// the point is what a process of the Worker's own (unprivileged) account
// can reach.
const unprivileged = 65534

func probe(t *testing.T, pl *supervise.ReaperPool, policy *sandbox.Policy, ws, secret, out string, target int) map[string]string {
	t.Helper()
	c := shell(t, probeScript)
	if os.Geteuid() == 0 {
		c.Path = mustLook(t, "setpriv")
		c.Args = append([]string{"--reuid=" + strconv.Itoa(unprivileged), "--regid=" + strconv.Itoa(unprivileged), "--clear-groups", mustLook(t, "sh")}, c.Args...)
	}
	c.Reaper, c.Sandbox = pl, policy
	c.Env = append(c.Env, "WS="+ws, "SECRET="+secret, "OUT="+out, "T="+strconv.Itoa(target))
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil || !res.Exit.Success() {
		t.Fatalf("probe: %v %+v %q", err, res.Exit, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Fields(string(res.Stdout)) {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	return got
}

// systemPolicy is what a shell needs to run, /proc read-only, and ws.
func systemPolicy(ws string) *sandbox.Policy {
	p := &sandbox.Policy{}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/proc"} {
		p.Rules = append(p.Rules, sandbox.Rule{Path: d, Access: sandbox.ReadOnly, Optional: true})
	}
	p.Rules = append(p.Rules, sandbox.Rule{Path: "/dev/null", Access: sandbox.Device}, sandbox.Rule{Path: ws, Access: sandbox.ReadWrite})
	return p
}

// A sandboxed child reaches its workspace and nothing else: no file
// outside its rules (directly, by a symlink or a hardlink), and no other
// process of the account through /proc (environ, mem, fd) although /proc
// itself is readable, nor by a signal. The same probes run unsandboxed
// from the same reaper reach everything, so every probe can fail, and a
// reaper that ran a sandboxed child is not confined itself.
func TestSandboxConfinesChild(t *testing.T) {
	abi := sandbox.ABI()
	if abi < 1 {
		t.Skip("no Landlock on this kernel")
	}
	dir, err := os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws, out := filepath.Join(dir, "ws"), filepath.Join(dir, "out")
	secret := filepath.Join(dir, "secret")
	owned := func(p string) {
		if os.Geteuid() == 0 {
			if err := os.Chown(p, unprivileged, unprivileged); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{ws, out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		owned(d)
	}
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	owned(secret)
	// The target: a process of the same account outside the sandbox.
	decoy := exec.Command(mustLook(t, "sleep"), "300")
	decoy.Env = []string{"DECOY_SECRET=s3cret"}
	if os.Geteuid() == 0 {
		decoy.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivileged, Gid: unprivileged}}
	}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { decoy.Process.Kill(); decoy.Wait() })
	pl := reapers(t)
	boxed := probe(t, pl, systemPolicy(ws), ws, secret, out, decoy.Process.Pid)
	want := map[string]string{"write-workspace": "yes", "read-secret": "no", "write-outside": "no",
		"hardlink-out": "no", "symlink-out": "no", "environ": "no", "mem": "no", "fd": "no", "signal": "no"}
	if !sandbox.Scoped(abi) {
		want["signal"] = "yes" // signals are scoped from ABI 6 on
	}
	for k, v := range want {
		if boxed[k] != v {
			t.Errorf("sandboxed %s = %q, want %q", k, boxed[k], v)
		}
	}
	os.RemoveAll(ws)
	os.Mkdir(ws, 0o700)
	owned(ws)
	open := probe(t, pl, nil, ws, secret, out, decoy.Process.Pid)
	for k := range want {
		if open[k] != "yes" {
			t.Errorf("unsandboxed %s = %q, want yes (the probe cannot fail)", k, open[k])
		}
	}
	if n := supervise.IdleReapers(pl); n != 1 {
		t.Errorf("idle reapers = %d, want the one reaper reused", n)
	}
}

// A policy naming a required path that does not exist fails the start
// with an errno; an optional one is skipped.
func TestSandboxMissingPath(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws := t.TempDir()
	p := systemPolicy(ws)
	p.Rules = append(p.Rules, sandbox.Rule{Path: filepath.Join(ws, "missing"), Access: sandbox.ReadOnly, Optional: true})
	c := shell(t, "exit 0")
	c.Reaper, c.Sandbox = reapers(t), p
	if res, err := supervise.Run(context.Background(), c, nil); err != nil || !res.Exit.Success() {
		t.Fatalf("optional missing path: %v %+v", err, res.Exit)
	}
	p.Rules[len(p.Rules)-1].Optional = false
	if _, err := supervise.Run(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("required missing path: err = %v", err)
	}
}

// Without a reaper there is no sandbox, so Start refuses.
func TestSandboxNeedsReaper(t *testing.T) {
	c := shell(t, "exit 0")
	c.Sandbox = systemPolicy(t.TempDir())
	if _, err := supervise.Start(context.Background(), c); err == nil {
		t.Fatal("a sandboxed command without a reaper started")
	}
}

package supervise_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
p chmod-outside chmod 0600 "$SECRET"
p chmod-symlink sh -c 'ln -s "$SECRET" "$WS/mlink" && chmod 0600 "$WS/mlink"'
p chown-outside chown "$(id -u):$(id -g)" "$SECRET"
p lchown-outside chown -h "$(id -u)" "$OUT"
p touch-outside touch -c -r "$SECRET" "$SECRET"
p xattr-outside "$PY" -c 'import os,sys; os.setxattr(sys.argv[1], "user.forge", b"x")' "$SECRET"
p rmxattr-outside "$PY" -c 'import os,sys; os.removexattr(sys.argv[1], "user.forge-old")' "$OLD"
p chmod-procfd "$PY" -c 'import os,sys; os.chmod("/proc/self/fd/%d" % os.open(sys.argv[1], os.O_PATH), 0o600)' "$SECRET"
p chmod-dirfd "$PY" -c 'import os,sys; os.chmod(os.path.basename(sys.argv[1]), 0o600, dir_fd=os.open(os.path.dirname(sys.argv[1]), os.O_PATH))' "$SECRET"
p chmod-cwd sh -c 'cd "$OUT" && chmod 0700 .'
p chown-emptypath "$PY" -c 'import ctypes,os,sys; fd=os.open(sys.argv[1], os.O_PATH); sys.exit(ctypes.CDLL(None, use_errno=True).fchownat(fd, b"", os.getuid(), -1, 0x1000) != 0)' "$SECRET"
p fchmod-readonly "$PY" -c 'import os,sys; os.fchmod(os.open(sys.argv[1], os.O_RDONLY), 0o644)' "$RO/f"
p futimens-readonly "$PY" -c 'import os,sys; os.utime(os.open(sys.argv[1], os.O_RDONLY))' "$RO/f"
p chattr-outside chattr +d "$OLD"
p build-inside sh -c 'printf "#!/bin/sh\necho built\n" > "$WS/build.sh" && chmod +x "$WS/build.sh" && "$WS/build.sh"'
p touch-inside sh -c 'touch "$WS/t" && touch -d @1000000000 "$WS/t" && test "$(stat -c %Y "$WS/t")" = 1000000000'
p chown-inside chown "$(id -u):$(id -g)" "$WS/t"
p copy-inside sh -c 'mkdir -p "$WS/src/d" && echo a > "$WS/src/d/a" && chmod 0750 "$WS/src/d/a" && cp -pR "$WS/src" "$WS/cp" && test -x "$WS/cp/d/a"'
p tar-inside sh -c 'tar -C "$WS" -cf "$WS/t.tar" src && mkdir "$WS/x" && tar -C "$WS/x" -xpf "$WS/t.tar" && test -x "$WS/x/src/d/a"'
p python-inside "$PY" -c 'import os,shutil,sys; w=sys.argv[1]; shutil.copytree(w+"/src", w+"/py"); shutil.copy2(w+"/src/d/a", w+"/py/b"); os.setxattr(w+"/py/b", "user.forge", b"x"); os.removexattr(w+"/py/b", "user.forge"); os.fchmod(os.open(w+"/py/b", os.O_RDONLY), 0o600); os.utime(w+"/py/b", (1, 2), follow_symlinks=False); os.chown(w+"/py", -1, os.getgid(), follow_symlinks=False)' "$WS"
p git-inside sh -c 'cd "$WS" && git init -q g && cd g && echo x > f && chmod +x f && git add f && git -c user.name=a -c user.email=a@b.invalid commit -qm x && git update-index --chmod=-x f && git checkout -q -- f'
`

// unprivileged is the account the probes run as when the test runs as
// root: CAP_SYS_PTRACE would let root past Landlock's ptrace check, and
// the point is what a process of the Worker's own (unprivileged) account
// can reach.
const unprivileged = 65534

// unprivilegedReapers is a reaper pool whose reapers, and so their
// programs, run as the unprivileged account when the test runs as root
// (a sandboxed program holds no capability: it could not change its
// account itself): the test binary, copied where that account can run
// it, started through setpriv.
func unprivilegedReapers(t *testing.T) *supervise.ReaperPool {
	t.Helper()
	if os.Geteuid() != 0 {
		return reapers(t)
	}
	dir, err := os.MkdirTemp("", "sandbox-reaper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(self(t))
	if err != nil {
		t.Fatal(err)
	}
	bin, wrapper := filepath.Join(dir, "reaper"), filepath.Join(dir, "reaper.sh")
	script := "#!/bin/sh\nexec " + mustLook(t, "setpriv") + " --reuid=" + strconv.Itoa(unprivileged) + " --regid=" + strconv.Itoa(unprivileged) +
		" --clear-groups " + bin + " \"$@\"\n"
	if os.Chmod(dir, 0o755) != nil || os.WriteFile(bin, b, 0o755) != nil || os.WriteFile(wrapper, []byte(script), 0o755) != nil {
		t.Fatal("cannot place the unprivileged reaper")
	}
	pl := supervise.NewReaperPool(wrapper)
	t.Cleanup(pl.Close)
	return pl
}

func probe(t *testing.T, pl *supervise.ReaperPool, policy *sandbox.Policy, ws, secret, out string, target int) map[string]string {
	t.Helper()
	c := shell(t, probeScript)
	c.Reaper, c.Sandbox = pl, policy
	c.Env = append(c.Env, "WS="+ws, "SECRET="+secret, "OUT="+out, "T="+strconv.Itoa(target),
		"RO="+filepath.Join(filepath.Dir(secret), "ro"), "OLD="+filepath.Join(filepath.Dir(secret), "old"),
		"PY=/usr/bin/python3", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
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
	// A read-only tree (the child may open its file, not change it) and a
	// file outside with an attribute to remove.
	ro, old := filepath.Join(dir, "ro"), filepath.Join(dir, "old")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(ro, "f"), old} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		owned(f)
	}
	if err := syscall.Setxattr(old, "user.forge-old", []byte("1"), 0); err != nil {
		t.Fatalf("this filesystem has no user attributes: %v", err)
	}
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
	pl := unprivilegedReapers(t)
	policy := systemPolicy(ws)
	policy.Rules = append(policy.Rules, sandbox.Rule{Path: ro, Access: sandbox.ReadOnly},
		sandbox.Rule{Path: "/dev/urandom", Access: sandbox.Device}) // git's temporary files
	boxed := probe(t, pl, policy, ws, secret, out, decoy.Process.Pid)
	want := map[string]string{"write-workspace": "yes", "read-secret": "no", "write-outside": "no",
		"hardlink-out": "no", "symlink-out": "no", "environ": "no", "mem": "no", "fd": "no", "signal": "no",
		// Metadata, which Landlock does not govern: the guard refuses it
		// outside the writable trees, by any name, and serves it inside.
		"chmod-outside": "no", "chmod-symlink": "no", "chown-outside": "no", "lchown-outside": "no",
		"touch-outside": "no", "xattr-outside": "no", "rmxattr-outside": "no", "chmod-procfd": "no",
		"chmod-dirfd": "no", "chmod-cwd": "no", "chown-emptypath": "no", "fchmod-readonly": "no",
		"futimens-readonly": "no", "chattr-outside": "no", // inode flags are refused everywhere
		"build-inside": "yes", "touch-inside": "yes", "chown-inside": "yes", "copy-inside": "yes",
		"tar-inside": "yes", "python-inside": "yes", "git-inside": "yes"}
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
	// The sandboxed probes reused one guarded reaper, the unsandboxed one
	// another: a trusted program never starts under the metadata filter.
	if n, g := supervise.IdleReapers(pl), supervise.IdleGuarded(pl); n != 2 || g != 1 {
		t.Errorf("idle reapers = %d (%d guarded), want one of each reused", n, g)
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

// A sandboxed program needs no rule of its own: the reaper opens it and
// the domain reads and executes that file. A binary and a script ("#!",
// which its interpreter reads by name, so $0 is that name) outside every
// rule both run; the files beside them stay out of reach; a name that
// leads to a directory is no program (EACCES).
func TestSandboxProgramOutsideRules(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws, outside := t.TempDir(), t.TempDir()
	b, err := os.ReadFile(mustLook(t, "sh"))
	if err != nil {
		t.Fatal(err)
	}
	bin, script, secret := filepath.Join(outside, "sh"), filepath.Join(outside, "check.sh"), filepath.Join(outside, "secret")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"zero=$0\"; cat "+secret+" || echo refused\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := reapers(t)
	for _, c := range []supervise.Command{
		{Path: bin, Args: []string{"-c", "echo zero=$0; cat " + secret + " || echo refused"}},
		{Path: script},
	} {
		c.Env, c.Dir, c.Reaper, c.Sandbox, c.OutputLimit = []string{"PATH=/usr/bin:/bin"}, ws, pl, systemPolicy(ws), 1<<16
		res, err := supervise.Run(context.Background(), c, nil)
		out := string(res.Stdout)
		if err != nil || !res.Exit.Success() || strings.Contains(out, "SECRET") || !strings.Contains(out, "refused") {
			t.Errorf("%s: %v %+v %q", filepath.Base(c.Path), err, res.Exit, out)
		}
		if c.Path == script && !strings.Contains(out, "zero="+script+"\n") {
			t.Errorf("the script's $0: %q, want its name", out)
		}
	}
	c := supervise.Command{Path: outside, Env: []string{}, Dir: ws, Reaper: pl, Sandbox: systemPolicy(ws), OutputLimit: 1 << 16}
	if _, err := supervise.Run(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a directory as the program: %v", err)
	}
}

// A program that comes opened (Command.Program) is the one executed and
// the one the domain's rule is on, whatever its name (Path) leads to: a
// name that is a link to another program runs the opened one. Without a sandbox an opened program is refused.
func TestSandboxOpenedProgram(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws, outside := t.TempDir(), t.TempDir()
	b, err := os.ReadFile(mustLook(t, "sh"))
	if err != nil {
		t.Fatal(err)
	}
	bin, name := filepath.Join(outside, "sh"), filepath.Join(ws, "prog")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mustLook(t, "true"), name); err != nil {
		t.Fatal(err)
	}
	prog, err := os.OpenFile(bin, 0x200000|syscall.O_CLOEXEC, 0) // O_PATH
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	c := supervise.Command{Path: name, Args: []string{"-c", "echo opened"},
		Program: prog, Env: []string{}, Dir: ws, Reaper: reapers(t), Sandbox: systemPolicy(ws), OutputLimit: 1 << 16}
	res, err := supervise.Run(context.Background(), c, nil)
	if out := string(res.Stdout); err != nil || !res.Exit.Success() || out != "opened\n" {
		t.Fatalf("opened program: %v %+v %q", err, res.Exit, out)
	}
	c.Sandbox = nil
	if _, err := supervise.Start(context.Background(), c); err == nil {
		t.Fatal("an opened program started without a sandbox")
	}
}

// A sandboxed program of a Worker running as root holds no capability
// (effective, permitted, inheritable, ambient and bounding sets empty,
// the securebits that give uid 0 capabilities locked off): it cannot
// read another root process's environ (CAP_SYS_PTRACE passed Landlock's
// ptrace check before: it read both), nor a 0600 file of root's outside
// its rules, nor raise its priority (CAP_SYS_NICE).
func TestSandboxRootHoldsNoCapability(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("ROOT-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := exec.Command(mustLook(t, "sleep"), "60")
	other.Env = []string{"OTHER_SECRET=1"}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	c := shell(t, `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status | tr -d '\t' | tr ':' '='
p() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=yes"; else echo "$n=no"; fi; }
p other-environ cat /proc/$OTHER/environ
p own-environ cat /proc/$SELF/environ
p secret cat "$SECRET"
p renice renice -n -5 -p $$`)
	c.Reaper, c.Sandbox, c.Dir = reapers(t), systemPolicy(ws), ws
	c.Env = append(c.Env, "OTHER="+strconv.Itoa(other.Process.Pid), "SELF="+strconv.Itoa(os.Getpid()), "SECRET="+secret, "WS="+ws)
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil || !res.Exit.Success() {
		t.Fatalf("%v %+v %q", err, res.Exit, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Fields(string(res.Stdout)) {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if got[k] != "0000000000000000" {
			t.Errorf("%s = %q, want none", k, got[k])
		}
	}
	for _, k := range []string{"other-environ", "own-environ", "secret", "renice"} {
		if got[k] != "no" {
			t.Errorf("%s: %q, want no", k, got[k])
		}
	}
	if t.Failed() {
		t.Logf("%s", res.Stdout)
	}
}

// A sandboxed program connects to pathname UNIX sockets of its own trees
// and to those of another account that every account may use, and to
// none of the Worker's account outside its trees: not its per-user
// service manager (systemd-run --user through XDG_RUNTIME_DIR, a stand-in
// listener that never accepts a connection), not its session bus; not a
// socket only a group may use, nor an abstract one. Before, the kernel
// connected them all (only the abstract one was refused, by scoping).
func TestSandboxUnixSockets(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	dir, err := os.MkdirTemp("", "sandbox-unix-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, run, pub := filepath.Join(dir, "ws"), filepath.Join(dir, "run", "user", strconv.Itoa(os.Geteuid())), filepath.Join(dir, "pub")
	for _, d := range []string{ws, filepath.Join(run, "systemd"), pub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(run, 0o700); err != nil {
		t.Fatal(err)
	}
	accepted := map[string]*int{}
	var mu sync.Mutex
	listen := func(name, path string, mode os.FileMode, uid int) {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if path[0] != '@' {
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			if uid >= 0 {
				if err := os.Chown(path, uid, uid); err != nil {
					t.Fatal(err)
				}
			}
		}
		n := new(int)
		accepted[name] = n
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				*n++
				mu.Unlock()
				c.Close()
			}
		}()
	}
	root := os.Geteuid() == 0
	listen("manager", filepath.Join(run, "systemd", "private"), 0o777, -1)
	listen("bus", filepath.Join(run, "bus"), 0o777, -1)
	listen("inside", filepath.Join(ws, "in.sock"), 0o700, -1)
	listen("abstract", "@forge-sandbox-unix-"+strconv.Itoa(os.Getpid()), 0, -1)
	if root { // sockets of another account
		listen("public", filepath.Join(pub, "pub.sock"), 0o777, unprivileged)
		listen("group", filepath.Join(pub, "group.sock"), 0o770, unprivileged)
	}
	connect := filepath.Join(dir, "connect")
	if err := os.WriteFile(connect, []byte("#!/usr/bin/python3\nimport socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1].replace('@', '\\0', 1))\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := shell(t, `p() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=yes"; else echo "$n=no"; fi; }
p manager $C "$RUN/systemd/private"
p manager-relative sh -c 'cd "$RUN/systemd" && $C private'
p bus $C "$RUN/bus"
p inside $C "$WS/in.sock"
p abstract $C "$ABSTRACT"
p public $C "$PUB/pub.sock"
p group $C "$PUB/group.sock"
p systemd-run timeout 5 systemd-run --user --scope true`)
	c.Env = append(c.Env, "C="+connect)
	p := systemPolicy(ws)
	p.Rules = append(p.Rules, sandbox.Rule{Path: connect, Access: sandbox.ReadOnly})
	c.Reaper, c.Sandbox, c.Dir = reapers(t), p, ws
	c.Env = append(c.Env, "RUN="+run, "WS="+ws, "PUB="+pub, "ABSTRACT=@forge-sandbox-unix-"+strconv.Itoa(os.Getpid()), "XDG_RUNTIME_DIR="+run)
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil || !res.Exit.Success() {
		t.Fatalf("%v %+v %q", err, res.Exit, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Fields(string(res.Stdout)) {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{"manager": "no", "manager-relative": "no", "bus": "no", "inside": "yes", "abstract": "no", "systemd-run": "no"}
	if root {
		want["public"], want["group"] = "yes", "no"
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"manager", "bus", "abstract", "group"} {
		if n := accepted[k]; n != nil && *n != 0 {
			t.Errorf("the %s listener accepted %d connections", k, *n)
		}
	}
	if t.Failed() {
		t.Logf("%s", res.Stdout)
	}
}

// The guard's own connect on a blocking socket is bounded: a UNIX
// connect to a listener of the program's whose backlog is full (it never
// accepts) answers EAGAIN, instead of holding the guard, and with it every
// other call of the program and the end of its attempt, until the
// listener goes (it waited until the program was killed before).
func TestSandboxConnectBounded(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws := t.TempDir()
	c := shell(t, `/usr/bin/python3 -c '
import errno, os, socket
ln = socket.socket(socket.AF_UNIX)
ln.bind("full.sock")
ln.listen(0)
held = []
for i in range(4):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("full.sock")
        held.append(s)
    except OSError as e:
        print("refused" if e.errno == errno.EAGAIN else "errno=%d" % e.errno)
        break
os.chmod("full.sock", 0o600)
print("after")
'`)
	c.Reaper, c.Sandbox, c.Dir, c.Timeout = reapers(t), systemPolicy(ws), ws, time.Minute
	res, err := supervise.Run(context.Background(), c, nil)
	if err != nil || !res.Exit.Success() || string(res.Stdout) != "refused\nafter\n" {
		t.Fatalf("%v %+v %q %q", err, res.Exit, res.Stdout, res.Stderr)
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

// A guarded reaper is under the metadata filter itself (its programs
// inherit it), and its guard serves the running program's writable trees
// only: the next program on the same reaper cannot change the metadata of
// the previous one's workspace. A trusted program starts from a reaper
// without the filter. Either is in its reaper's session, which has no
// controlling terminal.
func TestGuardFollowsTheRunningProgram(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pl := reapers(t)
	const script = `grep -h '^Seccomp:' /proc/$PPID/status /proc/self/status | tr -d '\t' | tr '\n' ' '
for d in "$A" "$B"; do if chmod 0700 "$d/f" 2>/dev/null; then echo -n "yes "; else echo -n "no "; fi; done
s=$(cut -d' ' -f6,7 /proc/self/stat); [ "$s" = "$PPID 0" ] && echo -n "session:reaper"`
	run := func(policy *sandbox.Policy) string {
		t.Helper()
		c := shell(t, script)
		c.Env = append(c.Env, "A="+a, "B="+b)
		c.Reaper, c.Sandbox = pl, policy
		res, err := supervise.Run(context.Background(), c, nil)
		if err != nil || !res.Exit.Success() {
			t.Fatalf("run: %v %+v %q", err, res.Exit, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	if got, want := run(systemPolicy(a)), "Seccomp:2 Seccomp:2 yes no session:reaper"; got != want {
		t.Errorf("first program (a writable): %q, want %q", got, want)
	}
	if got, want := run(systemPolicy(b)), "Seccomp:2 Seccomp:2 no yes session:reaper"; got != want {
		t.Errorf("next program on the same reaper (b writable): %q, want %q", got, want)
	}
	if n := supervise.IdleGuarded(pl); n != 1 {
		t.Errorf("%d guarded reapers idle, want the one reused", n)
	}
	if got, want := run(nil), "Seccomp:0 Seccomp:0 yes yes session:reaper"; got != want {
		t.Errorf("trusted program: %q, want %q", got, want)
	}
}

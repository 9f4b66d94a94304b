//go:build linux && (amd64 || arm64)

package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// OpenProgram takes a regular file (through a symbolic link too) and
// refuses anything else with EACCES; a binary is executed through its
// opened file, a script ("#!") by its name.
func TestOpenProgram(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"/", "root"}, {dir, "dir"}, {"/bin/sh", "sh"}, {"/dev/null", "null"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/", dir, filepath.Join(dir, "root"), filepath.Join(dir, "dir"), "/dev/null", filepath.Join(dir, "null")} {
		if pr, err := sandbox.OpenProgram(p); err != syscall.EACCES {
			if pr != nil {
				pr.Close()
			}
			t.Errorf("%s: %v, want EACCES", p, err)
		}
	}
	if _, err := sandbox.OpenProgram(filepath.Join(dir, "missing")); err != syscall.ENOENT {
		t.Errorf("missing: %v", err)
	}
	pr, err := sandbox.OpenProgram(filepath.Join(dir, "sh"))
	if err != nil {
		t.Fatal(err)
	}
	if p := pr.ExecPath(); !strings.HasPrefix(p, "/proc/self/fd/") {
		t.Errorf("binary: ExecPath %q", p)
	}
	pr.Close()
	pr, err = sandbox.OpenProgram(script)
	if err != nil {
		t.Fatal(err)
	}
	if p := pr.ExecPath(); p != script {
		t.Errorf("script: ExecPath %q, want its name", p)
	}
	pr.Close()
}

// A program outside every rule runs in a domain whose Program is its
// opened file, through that file, even after its name was made a link to
// "/"; the rule is the file's alone: the file beside it stays unreadable.
func TestProgramRuleIsTheOpenedFile(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	outside := t.TempDir()
	sh := filepath.Join(outside, "sh")
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sh, b, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "prog")
	if err := os.Symlink(sh, name); err != nil {
		t.Fatal(err)
	}
	p := &sandbox.Policy{}
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"} {
		p.Rules = append(p.Rules, sandbox.Rule{Path: d, Access: sandbox.ReadOnly, Optional: true})
	}
	p.Rules = append(p.Rules, sandbox.Rule{Path: "/dev/null", Access: sandbox.Device})
	pr, err := sandbox.OpenProgram(name)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	// The name now leads to "/": neither the rule nor the exec follows.
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", name); err != nil {
		t.Fatal(err)
	}
	p.Program = pr
	got := fromLockedThread(t, func() (func(), error) {
		_, err := sandbox.RestrictThread(p, nil)
		return func() {}, err
	}, pr.ExecPath(), []string{"sh", "-c", "echo ran; cat " + secret + " || echo refused; ls " + outside + " || echo unlisted"}, []string{"PATH=/usr/bin:/bin"})
	if !strings.Contains(got, "ran") || strings.Contains(got, "SECRET") || !strings.Contains(got, "refused") || !strings.Contains(got, "unlisted") {
		t.Errorf("got %q: want the program to run and nothing beside it to be readable", got)
	}
}

// OpenBeneath follows a link only while it stays beneath its directory:
// a link to an absolute path, one above the directory, ".." and a magic
// link are ErrOutside; what it opens AdoptProgram takes.
func TestOpenBeneath(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	for _, d := range []string{ws, filepath.Join(ws, "bin")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(ws, "bin", "tool"), filepath.Join(root, "outside")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"in": "bin/tool", "up": "bin/../bin/tool", "abs": filepath.Join(root, "outside"),
		"above": "../outside", "sh": "/bin/sh", "dir": "/bin", "loop": "loop"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, name := range []string{"in", "up", "bin/tool", "./bin/tool"} {
		f, err := sandbox.OpenBeneath(dir, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		pr, err := sandbox.AdoptProgram(int(f.Fd()), filepath.Join(ws, name))
		if err != nil {
			t.Errorf("%s: adopt: %v", name, err)
			continue
		}
		pr.Close()
	}
	for _, name := range []string{"abs", "above", "sh", "dir/sh", "../outside", "/bin/sh", "", "loop"} {
		if f, err := sandbox.OpenBeneath(dir, name); err != sandbox.ErrOutside {
			if f != nil {
				f.Close()
			}
			t.Errorf("%q: %v, want ErrOutside", name, err)
		}
	}
	if _, err := sandbox.OpenBeneath(dir, "missing"); err != syscall.ENOENT {
		t.Errorf("missing: %v", err)
	}
	// A magic link beneath the directory: /proc/self's root and cwd.
	proc, err := os.Open("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	for _, name := range []string{"root/bin/sh", "cwd"} {
		if f, err := sandbox.OpenBeneath(proc, name); err != sandbox.ErrOutside {
			if f != nil {
				f.Close()
			}
			t.Errorf("/proc/self/%s: %v, want ErrOutside", name, err)
		}
	}
}

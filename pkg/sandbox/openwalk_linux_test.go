//go:build linux && (amd64 || arm64)

package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWalkOpenMatchesOpenat2: where openat2 answers ENOSYS (the installed
// Worker unit's RestrictSUIDSGID=), walkOpen stands in for it; on the same
// tree, for each name and resolve mode this package uses, both reach the
// same inode or both fail with the same errno.
func TestWalkOpenMatchesOpenat2(t *testing.T) {
	top := t.TempDir()
	base := filepath.Join(top, "base")
	for _, d := range []string{"base/d/e", "outside"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"base/f", "base/d/e/g", "outside/secret"} {
		if err := os.WriteFile(filepath.Join(top, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"base/in":       "d/e/g",
		"base/d/up":     "../f",
		"base/abs":      filepath.Join(base, "f"),
		"base/out":      "../outside/secret",
		"base/dirout":   "../outside",
		"base/dangling": "nothing",
		"base/loop":     "loop",
		"base/chain":    "in",
		"base/self":     "/proc/self/root" + base,
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(top, name)); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	names := []string{"f", "d/e/g", "d/./e/../e/g", "in", "chain", "d/up", "abs", "out", "dirout/secret",
		"dangling", "loop", "self/f", "..", "../outside/secret", "d/..", ".", "d/e/g/", "missing/f", "f/x", "d/", "in/", "dirout/",
		base + "/f", "/proc/self/root" + base + "/f"}
	modes := []struct {
		flags, resolve uint64
	}{
		{oPath | syscall.O_CLOEXEC, resolveBeneath | resolveNoMagicLink},
		{oPath | syscall.O_NOFOLLOW | syscall.O_CLOEXEC, resolveBeneath | resolveNoSymlinks},
		{oPath | syscall.O_CLOEXEC, resolveNoMagicLink},
		{oPath | syscall.O_NOFOLLOW | syscall.O_CLOEXEC, resolveNoMagicLink},
	}
	ino := func(fd int) [2]uint64 {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		return [2]uint64{st.Dev, st.Ino}
	}
	for _, m := range modes {
		for _, name := range names {
			kfd, kerr := openat2raw(int(dir.Fd()), name, m.flags, m.resolve)
			wfd, werr := walkOpen(int(dir.Fd()), name, m.flags, m.resolve)
			switch {
			case kerr == syscall.ENOSYS:
				t.Fatal("openat2 refused here: nothing to compare with")
			case kerr != 0 || werr != 0:
				// A magic link the kernel refuses (ELOOP) is a path to
				// the walk, resolved as such: it may reach what the
				// path names, never more than a plain lookup would.
				if kerr != werr && !(kerr == syscall.ELOOP && m.resolve&resolveBeneath == 0) {
					t.Errorf("%q %#x: openat2 errno %v, walk errno %v", name, m.resolve, kerr, werr)
				}
			case ino(kfd) != ino(wfd):
				t.Errorf("%q %#x: openat2 and the walk reached different files", name, m.resolve)
			}
			for _, fd := range []int{kfd, wfd} {
				if fd >= 0 {
					syscall.Close(fd)
				}
			}
		}
	}
}

//go:build linux && (amd64 || arm64)

package install

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withRenameErrno makes the k-th renameat2 call from now (k = 0: every
// call) fail with errno, as a filesystem lacking RENAME_NOREPLACE does; it
// returns how many calls were made.
func withRenameErrno(t *testing.T, k int, errno syscall.Errno) *int {
	t.Helper()
	real := renameat2
	t.Cleanup(func() { renameat2 = real })
	n := new(int)
	renameat2 = func(from, to *byte) syscall.Errno {
		*n++
		if k == 0 || *n == k {
			return errno
		}
		return real(from, to)
	}
	return n
}

// EINVAL and ENOSYS are refusals: nothing is renamed, no plain rename is
// tried instead.
func TestRenameNoReplaceRefusesWithoutTheFlag(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EINVAL, syscall.ENOSYS} {
		dir := t.TempDir()
		from, to := filepath.Join(dir, "from"), filepath.Join(dir, "to")
		if err := os.WriteFile(from, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		withRenameErrno(t, 0, errno)
		err := renameNoReplace(from, to)
		if err == nil || !strings.Contains(err.Error(), "does not support renameat2") {
			t.Fatalf("%v: error %v", errno, err)
		}
		if _, err := os.Lstat(from); err != nil {
			t.Fatalf("%v: the source moved", errno)
		}
		if _, err := os.Lstat(to); err == nil {
			t.Fatalf("%v: fell back to a plain rename", errno)
		}
	}
}

// A fresh install on a filesystem without RENAME_NOREPLACE is refused at
// publication and leaves the machine as it was.
func TestFreshInstallWithoutRenameNoReplaceChangesNothing(t *testing.T) {
	e := newEnv(t)
	req := writeRelease(t, v1)
	req.EnableNow = true
	before, beforeState := e.digest(), e.state()
	withRenameErrno(t, 0, syscall.EINVAL)
	ie := wantCode(t, func() error { err, _ := e.run(req); return err }(), ExitRefused)
	if ie.Stage != "publish" || !strings.Contains(ie.Msg, "RENAME_NOREPLACE") {
		t.Fatalf("stage %s: %s", ie.Stage, ie.Msg)
	}
	if e.digest() != before || e.state() != beforeState {
		t.Fatal("a refused publication changed the machine")
	}
}

// An upgrade whose k-th rename meets EINVAL, for every k, is refused and
// restored exactly, with the previous release serving.
func TestUpgradeWithoutRenameNoReplaceRestoresExactly(t *testing.T) {
	e := installed(t, writeRelease(t, v1))
	up := with(writeRelease(t, v2), true, true)
	before, beforeState := e.digest(), e.state()
	for k := 1; ; k++ {
		n := withRenameErrno(t, k, syscall.EINVAL)
		err, _ := e.run(up)
		if *n < k {
			if err != nil {
				t.Fatalf("upgrade without EINVAL failed: %v", err)
			}
			if k < 4 {
				t.Fatalf("only %d renames", k-1)
			}
			break
		}
		ie := wantCode(t, err, ExitRefused)
		if ie.Stage != "publish" {
			t.Fatalf("rename %d: stage %s (%s)", k, ie.Stage, ie.Msg)
		}
		if e.digest() != before || e.state() != beforeState {
			t.Fatalf("rename %d: not restored: %s", k, e.state())
		}
	}
}

// Package cgrouptest gives a test a cgroup v2 subtree of its own to
// contain sandboxed programs in (supervise.ReaperPool.Contain), the way
// the Worker contains them below its delegated cgroup. It is imported by
// tests only.
package cgrouptest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Subtree returns a fresh cgroup below the test process's own (the test
// runs there as root, or in a cgroup delegated to its account), removed
// when the test ends. Without one the test is skipped, and fails when CI
// is set.
func Subtree(t *testing.T) *supervise.Cgroups {
	t.Helper()
	own, err := supervise.OwnCgroup()
	if err == nil {
		dir := filepath.Join(own, "forge-test-"+strconv.Itoa(os.Getpid())+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
		if err = os.Mkdir(dir, 0o755); err == nil {
			t.Cleanup(func() { os.Remove(dir) })
			var cg *supervise.Cgroups
			if cg, err = supervise.NewCgroups(dir); err == nil {
				t.Cleanup(cg.Close)
				return cg
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no writable cgroup v2 for the test: %v", err)
	}
	t.Skipf("no writable cgroup v2 for the test: %v", err)
	return nil
}

// Own returns a fresh, empty cgroup below the test process's own, for a
// process the test starts in it (syscall.SysProcAttr.UseCgroupFD with
// Open's descriptor): a sandboxed Worker needs a cgroup of its own. When
// the test ends, everything in it and below it is killed and it is
// removed. Without one the test is skipped, and fails when CI is set.
func Own(t testing.TB) string {
	t.Helper()
	own, err := supervise.OwnCgroup()
	if err == nil {
		dir := filepath.Join(own, "forge-test-"+strconv.Itoa(os.Getpid())+"-own-"+strconv.FormatUint(seq.Add(1), 10))
		if err = os.Mkdir(dir, 0o755); err == nil {
			t.Cleanup(func() { remove(dir) })
			return dir
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no writable cgroup v2 for the test: %v", err)
	}
	t.Skipf("no writable cgroup v2 for the test: %v", err)
	return ""
}

var seq atomic.Uint64

// remove kills every process in dir's subtree and removes it, children
// first, for a bounded time.
func remove(dir string) {
	os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		var dirs []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
		if _, err := os.Stat(dir); err != nil {
			return
		}
	}
}

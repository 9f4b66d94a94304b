package worker

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxIdleRunDirs bounds the directories kept for reuse.
const maxIdleRunDirs = 64

// runDirs hands out the private, empty working directories that plugin
// invocations run in, under runtime_root. A directory comes back after its
// invocation; when the plugin left it exactly as it was made (the same
// directory, mode 0700, empty) it is kept for a later invocation, else it is
// removed with whatever it holds. Creating and removing a directory costs
// about as much as a tenth of a small plugin's whole start; checking one
// costs a readdir.
//
// The plugin and every descendant are gone when a directory comes back
// (the runner reaps and sweeps them first), so nothing can change it
// between the check and its reuse.
type runDirs struct {
	root  string
	reuse bool // false: every directory is removed when it comes back

	mu   sync.Mutex
	idle []runDir
}

// runDir is one working directory and how it looked when it was made.
type runDir struct {
	path string
	made os.FileInfo
}

// take returns an idle directory or makes a new one.
func (d *runDirs) take() (runDir, error) {
	d.mu.Lock()
	if n := len(d.idle); n > 0 {
		r := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		return r, nil
	}
	d.mu.Unlock()
	path, err := os.MkdirTemp(d.root, "plugin-")
	if err != nil {
		return runDir{}, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		os.RemoveAll(path)
		return runDir{}, err
	}
	return runDir{path: path, made: fi}, nil
}

// give takes back a directory after its invocation.
func (d *runDirs) give(r runDir) {
	if d.reuse && unchanged(r) {
		d.mu.Lock()
		if len(d.idle) < maxIdleRunDirs {
			d.idle = append(d.idle, r)
			r.path = ""
		}
		d.mu.Unlock()
	}
	if r.path != "" {
		_ = removeTree(r.path)
	}
}

// close removes the idle directories.
func (d *runDirs) close() {
	d.mu.Lock()
	idle := d.idle
	d.idle = nil
	d.mu.Unlock()
	for _, r := range idle {
		_ = removeTree(r.path)
	}
}

// removeTree removes path and everything under it. When that fails it
// makes the directories under path writable (a plugin may leave read-only
// ones) and tries once more. Symbolic links are removed, never followed:
// os.RemoveAll opens path's parent and works beneath it through
// descriptors (openat with O_NOFOLLOW, unlinkat), and the modes are set
// through descriptors too (chmodTree), so a directory an agent swaps for
// a symbolic link meanwhile leads nowhere.
func removeTree(path string) error {
	if os.RemoveAll(path) == nil {
		return nil
	}
	if d, err := openDirNoFollow(path); err == nil {
		chmodTree(d, 0)
		d.Close()
	}
	return os.RemoveAll(path)
}

// maxChmodDepth bounds chmodTree's recursion.
const maxChmodDepth = 256

// chmodTree gives dir and every directory beneath it mode 0700, through
// descriptors opened without following a symbolic link.
func chmodTree(dir *os.File, depth int) {
	_ = dir.Chmod(0o700)
	if depth >= maxChmodDepth {
		return
	}
	for {
		names, err := dir.Readdirnames(1024)
		for _, n := range names {
			if sub, err := openDirAt(dir, n); err == nil {
				chmodTree(sub, depth+1)
				sub.Close()
			}
		}
		if err != nil {
			return
		}
	}
}

// SweepRuntime removes what an earlier run of this Worker left in
// runtimeRoot when it stopped without cleaning up (a SIGKILL leaves every
// directory in use behind): plugin working directories (plugin-*),
// private git homes (git-*) and scoped-check directories (check-*), and
// the leftovers of killed base fetches in the source caches
// (sweepSourceCaches). Call it
// once at startup, before any lane runs: runtime_root belongs to this
// Worker alone. Other entries are left alone. The error names no path.
func SweepRuntime(runtimeRoot string) error {
	if !removeEntries(runtimeRoot, "plugin-", "git-", "check-") || !sweepSourceCaches(runtimeRoot) {
		return errors.New("sweep: some leftovers in runtime_root could not be removed")
	}
	return nil
}

// removeEntries removes every entry of dir whose name starts with one of
// prefixes (removeTree). It reports whether dir was read and every such
// entry removed.
func removeEntries(dir string, prefixes ...string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	ok := true
	for _, e := range ents {
		for _, p := range prefixes {
			if strings.HasPrefix(e.Name(), p) {
				ok = removeTree(filepath.Join(dir, e.Name())) == nil && ok
				break
			}
		}
	}
	return ok
}

// unchanged reports whether r is still an empty 0700 directory, the one it
// was made as (not replaced, for example by a symbolic link). A plugin
// that removed it and made a new empty 0700 directory in its place (the
// file system may even give it the same inode) leaves nothing to tell
// apart: that one is as private and as empty.
func unchanged(r runDir) bool {
	f, err := openDirNoFollow(r.path) // a link or a FIFO in its place: no
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Mode() != r.made.Mode() || fi.Mode().Perm() != 0o700 || !os.SameFile(fi, r.made) {
		return false
	}
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

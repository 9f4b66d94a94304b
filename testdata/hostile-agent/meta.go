package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// probeMeta changes the metadata of every file and directory it was told
// about, and of its repository's files (which it may read), to what it
// already is (the same mode, owner and times; an attribute set and
// removed again): Landlock does not govern these calls, the sandbox's
// metadata guard must refuse each of them outside the workspace, by
// every route:
//
//   - meta-chmod, meta-chown, meta-utimes, meta-xattr: by path;
//   - meta-symlink: through a symbolic link in its own directory;
//   - meta-procfd: /proc/self/fd/N of an O_PATH descriptor;
//   - meta-dirfd: fchmodat relative to an O_PATH descriptor of the parent;
//   - meta-emptypath: fchownat(fd, "", AT_EMPTY_PATH) on an O_PATH descriptor;
//   - meta-fd: fchmod and futimens on a descriptor opened for reading;
//   - meta-i386, meta-x32: chmod through the i386 (int 0x80) and x32
//     system call tables (amd64), in a child process (foreignChmod).
func (a *agent) probeMeta(dir string, writeDirs []string) {
	targets := append(dedup(a.targets), writeDirs...)
	targets = append(targets, repositoryFiles(dir)...)
	var foreign []string // mode, path, ...: for foreignChmod
	for i, p := range dedup(targets) {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil || st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			continue
		}
		mode := st.Mode & 0o7777
		a.add("meta-chmod", p, syscall.Chmod(p, mode) == nil, nil)
		a.add("meta-chown", p, syscall.Lchown(p, -1, -1) == nil, nil)
		at, mt := time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix())
		a.add("meta-utimes", p, os.Chtimes(p, at, mt) == nil, nil)
		ok := syscall.Setxattr(p, "user.forge-hostile", []byte("1"), 0) == nil
		if ok {
			syscall.Removexattr(p, "user.forge-hostile")
		}
		a.add("meta-xattr", p, ok, nil)
		s := filepath.Join(dir, "meta-"+strconv.Itoa(i))
		ok = false
		if os.Symlink(p, s) == nil {
			ok = syscall.Chmod(s, mode) == nil
			os.Remove(s)
		}
		a.add("meta-symlink", p, ok, nil)
		ok = false
		empty := [1]byte{}
		if fd, err := syscall.Open(p, oPath|syscall.O_CLOEXEC, 0); err == nil {
			ok = syscall.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode) == nil
			_, _, e := syscall.Syscall6(syscall.SYS_FCHOWNAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), ^uintptr(0), ^uintptr(0), 0x1000, 0)
			a.add("meta-emptypath", p, e == 0, nil)
			syscall.Close(fd)
		}
		a.add("meta-procfd", p, ok, nil)
		ok = false
		if fd, err := syscall.Open(filepath.Dir(p), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
			ok = syscall.Fchmodat(fd, filepath.Base(p), mode, 0) == nil
			syscall.Close(fd)
		}
		a.add("meta-dirfd", p, ok, nil)
		if fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
			ok := syscall.Fchmod(fd, mode) == nil
			_, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)
			a.add("meta-fd", p, ok || e == 0, nil)
			syscall.Close(fd)
		}
		foreign = append(foreign, strconv.FormatUint(uint64(mode), 8), p)
	}
	if len(foreign) > 0 {
		for _, t := range foreignChmod(foreign) {
			a.add(t.kind, t.path, t.ok, nil)
		}
	}
}

// repositoryFiles are files of its repository it may read (on a static
// registration): the repository's config and HEAD and the files at its
// root, found from the worktree's .git file.
func repositoryFiles(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return nil
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || !filepath.IsAbs(admin) {
		return nil
	}
	common := filepath.Dir(filepath.Dir(admin))
	out := []string{filepath.Join(common, "config"), filepath.Join(common, "HEAD")}
	ents, _ := os.ReadDir(filepath.Dir(common))
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, filepath.Join(filepath.Dir(common), e.Name()))
		}
	}
	return out
}

// foreignTry is one chmod through a foreign system call table.
type foreignTry struct {
	kind, path string
	ok         bool
}

// foreignChmod runs "hostile-agent foreign MODE PATH..." and reads its
// answers. The calls run apart, bounded in time: a seccomp filter may kill
// the calling thread rather than the process (systemd's
// SystemCallArchitectures= does), which would hang a Go program. Every
// pair is a try; one without an answer did not succeed.
func foreignChmod(modePaths []string) []foreignTry {
	kinds := foreignKinds()
	if len(kinds) == 0 {
		return nil
	}
	got := map[string]bool{}
	if self, err := os.Executable(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, _ := exec.CommandContext(ctx, self, append([]string{"foreign"}, modePaths...)...).Output()
		cancel()
		for _, line := range strings.Split(string(out), "\n") {
			if k, i, ok := strings.Cut(line, " "); ok {
				got[k+" "+i] = true
			}
		}
	}
	var tries []foreignTry
	for i := 0; i+1 < len(modePaths); i += 2 {
		for _, k := range kinds {
			tries = append(tries, foreignTry{k, modePaths[i+1], got[k+" "+strconv.Itoa(i/2)]})
		}
	}
	return tries
}

const oPath = 0x200000 // O_PATH, the same on amd64 and arm64

package supervise

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"syscall"
)

// The parsers of what the kernel says about cgroups: /proc/self/cgroup,
// /proc/self/mountinfo and a cgroup's cgroup.events. They are strict and
// bounded: whatever does not have the expected shape is an error, never a
// guess.

// leafName is the child of a delegated cgroup the caller moves itself
// into (cgroup v2 lets a cgroup that enables controllers for its children
// hold no process itself).
const leafName = "supervisor"

// maxCgroupPath bounds a cgroup's path and a mount point (PATH_MAX).
const maxCgroupPath = 4096

var errCgroupFormat = errors.New("unexpected cgroup format")

// parseProcCgroup returns the cgroup v2 path of /proc/<pid>/cgroup: the
// one line "0::/path" (a hybrid hierarchy lists the v1 hierarchies too,
// with a nonzero id). No such line, two of them, or a path that is not
// absolute and clean is an error.
func parseProcCgroup(b []byte) (string, error) {
	found := ""
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("0::"))
		if !ok {
			continue
		}
		if found != "" || !cleanAbs(string(rest)) {
			return "", errCgroupFormat
		}
		found = string(rest)
	}
	if found == "" {
		return "", errCgroupFormat
	}
	return found, nil
}

// CgroupV2Path is the cgroup v2 path in a /proc/<pid>/cgroup file's
// contents b (the "0::/path" line; see parseProcCgroup).
func CgroupV2Path(b []byte) (string, error) { return parseProcCgroup(b) }

// LeafCgroup is the name of the child of its delegated cgroup that a
// process moves itself into (DelegatedCgroups): a process in a cgroup of
// that name below the one it was started in contains its programs.
const LeafCgroup = leafName

// cleanAbs reports whether p is an absolute path with no empty, "." or
// ".." element and no NUL, within maxCgroupPath ("/" itself is one).
func cleanAbs(p string) bool {
	if len(p) == 0 || len(p) > maxCgroupPath || p[0] != '/' || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	if p == "/" {
		return true
	}
	for _, el := range strings.Split(p[1:], "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// cgroupDir returns where the cgroup v2 path cg is in the file system,
// from /proc/self/mountinfo: the first cgroup2 mount whose root is cg or
// an ancestor of it. Mount points and roots are unescaped (\040 and the
// like).
func cgroupDir(mountinfo []byte, cg string) (string, error) {
	for _, line := range bytes.Split(mountinfo, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(string(line))
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+1 >= len(f) {
			return "", errCgroupFormat
		}
		if f[sep+1] != "cgroup2" {
			continue
		}
		root, ok1 := unescapeMount(f[3])
		point, ok2 := unescapeMount(f[4])
		if !ok1 || !ok2 || !cleanAbs(root) || !cleanAbs(point) {
			return "", errCgroupFormat
		}
		rel, ok := beneath(cg, root)
		if !ok {
			continue
		}
		dir := strings.TrimSuffix(point, "/") + rel
		if dir == "" {
			dir = "/"
		}
		if len(dir) > maxCgroupPath {
			return "", errCgroupFormat
		}
		return dir, nil
	}
	return "", errNoCgroup2
}

var errNoCgroup2 = errors.New("no cgroup v2 mount holds the process's cgroup")

// beneath returns what p has below root ("" for root itself, else a path
// starting with "/"), and whether p is root or below it.
func beneath(p, root string) (string, bool) {
	if root == "/" {
		if p == "/" {
			return "", true
		}
		return p, true
	}
	if p == root {
		return "", true
	}
	if rest, ok := strings.CutPrefix(p, root); ok && rest[0] == '/' {
		return rest, true
	}
	return "", false
}

// unescapeMount undoes mountinfo's octal escapes (\ooo, for space, tab,
// newline and backslash).
func unescapeMount(s string) (string, bool) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", false
		}
		n, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(n))
		i += 3
	}
	return b.String(), true
}

// digits reports whether v is a decimal number of at most 20 digits.
func digits(v []byte) bool {
	if len(v) == 0 || len(v) > 20 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseCgroupEvents returns the populated field of a cgroup.events file
// ("populated 0|1" among "key number" lines, each key once).
func parseCgroupEvents(b []byte) (bool, error) {
	if len(b) > 4096 {
		return false, errCgroupFormat
	}
	seen := map[string]bool{}
	populated, found := false, false
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(k) == 0 || seen[string(k)] || !digits(v) {
			return false, errCgroupFormat
		}
		seen[string(k)] = true
		if string(k) == "populated" {
			if string(v) != "0" && string(v) != "1" {
				return false, errCgroupFormat
			}
			populated, found = string(v) == "1", true
		}
	}
	if !found {
		return false, errCgroupFormat
	}
	return populated, nil
}

// CgroupError says why a cgroup v2 subtree cannot contain sandboxed
// programs. Its message holds a fixed reason and, when known, an errno's
// text; never a path.
type CgroupError struct {
	Reason string
	Err    error
}

func (e *CgroupError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *CgroupError) Unwrap() error { return e.Err }

func cgroupError(reason string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &CgroupError{Reason: reason, Err: errno}
	}
	return &CgroupError{Reason: reason}
}

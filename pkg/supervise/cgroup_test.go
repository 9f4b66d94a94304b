package supervise

import (
	"strings"
	"testing"
)

func TestParseProcCgroup(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"0::/\n", "/", true},
		{"0::/system.slice/agent-forge-worker.service\n", "/system.slice/agent-forge-worker.service", true},
		{"9:name=systemd:/\n4:memory:/a/b\n0::/user.slice/u.scope\n", "/user.slice/u.scope", true},
		{"0::/a b/c\n", "/a b/c", true},
		{"", "", false},
		{"4:memory:/a\n", "", false},  // v1 only
		{"0::/a\n0::/b\n", "", false}, // two
		{"0::a\n", "", false},         // relative
		{"0::/a/../b\n", "", false},   // not clean
		{"0::/a//b\n", "", false},     // empty element
		{"0::/a/\n", "", false},       // trailing slash
		{"0::\n", "", false},          // empty
		{"0::/a\x00b\n", "", false},   // NUL
		{"0::/" + strings.Repeat("a", 5000) + "\n", "", false},
	} {
		got, err := parseProcCgroup([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: %q %v, want %q ok=%t", c.in, got, err, c.want, c.ok)
		}
	}
}

const hybridMountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func TestCgroupDir(t *testing.T) {
	for _, c := range []struct {
		mi, cg, want string
		ok           bool
	}{
		{hybridMountinfo, "/", "/sys/fs/cgroup/unified", true},
		{hybridMountinfo, "/forge/w", "/sys/fs/cgroup/unified/forge/w", true},
		{"30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/system.slice/w.service",
			"/sys/fs/cgroup/system.slice/w.service", true},
		// A mount of a subtree (a container's view): its root is cut off.
		{"30 23 0:26 /system.slice/w.service /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/system.slice/w.service/x",
			"/sys/fs/cgroup/x", true},
		{"30 23 0:26 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/system.slice/w.service", "", false},
		{"30 23 0:26 /system.slice/w /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/system.slice/w.service", "", false},
		{`30 23 0:26 / /mnt/c\040g rw - cgroup2 cgroup2 rw` + "\n", "/a", "/mnt/c g/a", true},
		{`30 23 0:26 / /mnt/c\04 rw - cgroup2 cgroup2 rw` + "\n", "/a", "", false},
		{`30 23 0:26 / /mnt/c\999 rw - cgroup2 cgroup2 rw` + "\n", "/a", "", false},
		{"22 27 0:21 / /proc rw,relatime - proc proc rw\n", "/", "", false}, // no cgroup2
		{"22 27 0:21 / /proc rw\n", "/", "", false},                         // no separator
		{"30 23 0:26 / rel rw - cgroup2 cgroup2 rw\n", "/", "", false},      // relative mount point
	} {
		got, err := cgroupDir([]byte(c.mi), c.cg)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q in %q: %q %v, want %q ok=%t", c.cg, c.mi, got, err, c.want, c.ok)
		}
	}
}

func TestParseCgroupEvents(t *testing.T) {
	for _, c := range []struct {
		in            string
		populated, ok bool
	}{
		{"populated 0\nfrozen 0\n", false, true},
		{"populated 1\nfrozen 0\n", true, true},
		{"frozen 1\npopulated 1\nnew 12\n", true, true},
		{"", false, false},
		{"frozen 0\n", false, false},
		{"populated 2\n", false, false},
		{"populated 1\npopulated 0\n", false, false},
		{"populated  1\n", false, false},
		{"populated\n", false, false},
		{"populated 1 x\n", false, false},
		{"populated -1\n", false, false},
	} {
		got, err := parseCgroupEvents([]byte(c.in))
		if (err == nil) != c.ok || got != c.populated {
			t.Errorf("%q: %t %v, want %t ok=%t", c.in, got, err, c.populated, c.ok)
		}
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("0::/\n"))
	f.Add([]byte("9:name=systemd:/\n0::/user.slice/u.scope\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProcCgroup(b)
		if err == nil && !cleanAbs(p) {
			t.Fatalf("accepted %q", p)
		}
	})
}

func FuzzCgroupDir(f *testing.F) {
	f.Add([]byte(hybridMountinfo), "/a")
	f.Add([]byte(`30 23 0:26 /x /m\040n rw - cgroup2 cgroup2 rw`+"\n"), "/x/y")
	f.Fuzz(func(t *testing.T, mi []byte, cg string) {
		if !cleanAbs(cg) {
			return
		}
		dir, err := cgroupDir(mi, cg)
		if err == nil && (!strings.HasPrefix(dir, "/") || len(dir) > maxCgroupPath || strings.Contains(dir, "/../")) {
			t.Fatalf("%q", dir)
		}
	})
}

func FuzzParseCgroupEvents(f *testing.F) {
	f.Add([]byte("populated 0\nfrozen 0\n"))
	f.Add([]byte("populated 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseCgroupEvents(b)
	})
}

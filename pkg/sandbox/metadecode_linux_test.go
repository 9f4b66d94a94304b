//go:build linux && (amd64 || arm64)

package sandbox

import (
	"strings"
	"syscall"
	"testing"
)

// memAt is a program's memory for the decoder: mem mapped at base, the
// rest unreadable.
func memAt(base uint64, mem []byte) memReader {
	return func(addr uint64, b []byte) int {
		if addr < base || addr-base >= uint64(len(mem)) {
			return 0
		}
		return copy(b, mem[addr-base:])
	}
}

const fuzzBase = 0x10000

func TestDecodeCall(t *testing.T) {
	mem := []byte("f\x00user.x\x00")
	mem = append(mem, make([]byte, 7)...) // the times at 16
	times := []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0}
	mem = append(mem, times...) // {1 s, 2 us|ns}, {3 s, 1000000}
	read := memAt(fuzzBase, mem)
	path, name, ts := uint64(fuzzBase), uint64(fuzzBase+2), uint64(fuzzBase+16)
	cases := []struct {
		name string
		kind callKind
		args [6]uint64
		want syscall.Errno
		chk  func(metaReq) bool
	}{
		{"chmod", callFchmodat, [6]uint64{uint64(uint32(0xffffff9c)), path, 0o104755}, 0,
			func(r metaReq) bool { return r.dirfd == atFDCWD && r.path == "f" && r.mode == 0o4755 && r.follow }},
		{"fchmodat2 nofollow", callFchmodat2, [6]uint64{3, path, 0o644, atSymlinkNoFollow}, 0,
			func(r metaReq) bool { return r.dirfd == 3 && !r.follow }},
		{"fchmodat2 bad flag", callFchmodat2, [6]uint64{3, path, 0o644, 1}, syscall.EINVAL, nil},
		{"chmod NULL", callChmod, [6]uint64{0, 0o644}, syscall.EFAULT, nil},
		{"chmod unmapped", callChmod, [6]uint64{fuzzBase + 1<<20, 0o644}, syscall.EFAULT, nil},
		{"lchown", callLchown, [6]uint64{path, 1000, 0xffffffff}, 0,
			func(r metaReq) bool { return !r.follow && r.uid == 1000 && r.gid == 0xffffffff }},
		{"futimens", callUtimensat, [6]uint64{4, 0, 0, 0}, 0, func(r metaReq) bool { return r.byFD && r.dirfd == 4 && r.times == nil }},
		{"futimens flags", callUtimensat, [6]uint64{4, 0, 0, atSymlinkNoFollow}, syscall.EINVAL, nil},
		{"utimensat AT_FDCWD NULL", callUtimensat, [6]uint64{uint64(uint32(0xffffff9c)), 0, 0, 0}, syscall.EFAULT, nil},
		{"utimensat times", callUtimensat, [6]uint64{3, path, ts, 0}, 0,
			func(r metaReq) bool { return r.times != nil && r.times[0].Sec == 1 && r.times[0].Nsec == 2 }},
		{"utimes usec range", callUtimes, [6]uint64{path, ts}, syscall.EINVAL, nil},
		{"setxattr", callSetxattr, [6]uint64{path, name, path, 2, xattrCreate}, 0,
			func(r metaReq) bool {
				return r.name == "user.x" && string(r.value) == "f\x00" && r.xflags == xattrCreate
			}},
		{"setxattr big", callSetxattr, [6]uint64{path, name, path, maxXattrValue + 1}, syscall.E2BIG, nil},
		{"setxattr flags", callSetxattr, [6]uint64{path, name, path, 1, 4}, syscall.EINVAL, nil},
		{"setxattr short value", callFsetxattr, [6]uint64{3, name, path, 4096}, syscall.EFAULT, nil},
		{"removexattr empty name", callRemovexattr, [6]uint64{path, path + 1}, syscall.ERANGE, nil},
		{"unknown", 0, [6]uint64{}, syscall.ENOSYS, nil},
	}
	for _, c := range cases {
		r, e := decodeCall(c.kind, c.args, read)
		if e != c.want || (e == 0 && c.chk != nil && !c.chk(r)) {
			t.Errorf("%s: %+v %v, want %v", c.name, r, e, c.want)
		}
	}
	long := memAt(fuzzBase, []byte(strings.Repeat("a", maxGuardPath)))
	if _, e := decodeCall(callChmod, [6]uint64{fuzzBase}, long); e != syscall.ENAMETOOLONG {
		t.Errorf("long path: %v", e)
	}
}

func TestOwnFD(t *testing.T) {
	for path, want := range map[string]int{"/proc/self/fd/3": 3, "/proc/thread-self/fd/12": 12} {
		if n, ok := ownFD(path); !ok || n != want {
			t.Errorf("%s: %d %v", path, n, ok)
		}
	}
	for _, path := range []string{"/proc/self/fd/", "/proc/self/fd/3/", "/proc/self/fd/-1", "/proc/1/fd/3",
		"/proc/self/cwd", "/proc/self/fd/99999999999", "/proc/self/fd/3/../4", "proc/self/fd/3"} {
		if _, ok := ownFD(path); ok {
			t.Errorf("%s accepted", path)
		}
	}
}

// The decoder never reads past its bounds, and what it returns keeps them.
func FuzzDecodeCall(f *testing.F) {
	f.Add(uint8(callFchmodat2), uint64(0xffffff9c), uint64(fuzzBase), uint64(0o755), uint64(0), uint64(0), []byte("a/b\x00"))
	f.Add(uint8(callSetxattr), uint64(fuzzBase), uint64(fuzzBase+2), uint64(fuzzBase), uint64(3), uint64(0), []byte("f\x00user.k\x00"))
	f.Add(uint8(callUtimensat), uint64(3), uint64(fuzzBase), uint64(fuzzBase+8), uint64(0x1000), uint64(0), make([]byte, 40))
	f.Fuzz(func(t *testing.T, kind uint8, a0, a1, a2, a3, a4 uint64, mem []byte) {
		reads := 0
		read := func(addr uint64, b []byte) int {
			reads++
			if len(b) > maxXattrValue {
				t.Fatalf("read of %d bytes", len(b))
			}
			return memAt(fuzzBase, mem)(addr, b)
		}
		r, e := decodeCall(callKind(kind%20), [6]uint64{a0, a1, a2, a3, a4}, read)
		if reads > 3 {
			t.Fatalf("%d reads", reads)
		}
		if e != 0 {
			return
		}
		if len(r.path) >= maxGuardPath || strings.IndexByte(r.path, 0) >= 0 || len(r.name) >= maxXattrName ||
			len(r.value) > maxXattrValue || r.mode > 0o7777 || r.op < opChmod || r.op > opRemovexattr {
			t.Fatalf("out of bounds: %+v", r)
		}
		if r.times != nil {
			for _, ts := range r.times {
				if (ts.Nsec < 0 || ts.Nsec >= 1e9) && ts.Nsec != utimeNow && ts.Nsec != utimeOmit {
					t.Fatalf("nanoseconds %d", ts.Nsec)
				}
			}
		}
		if n, ok := ownFD(r.path); ok && n < 0 {
			t.Fatalf("descriptor %d", n)
		}
	})
}

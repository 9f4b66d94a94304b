package worker

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// A file system mounted over a directory holding a shared path makes the
// shared rules again: no inotify event tells, the mount table does.
func TestSandboxRulesNoticeMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting takes root")
	}
	sb, dir := rulesFixture(t, true)
	s := sb.current()
	box := filepath.Join(dir, "a", "box")
	if err := syscall.Mount("forge-test", box, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(box, syscall.MNT_DETACH) })
	s = madeAgain(t, sb, s, "tmpfs over box")
	if err := syscall.Unmount(box, 0); err != nil {
		t.Fatal(err)
	}
	madeAgain(t, sb, s, "tmpfs unmounted")
}

// inotifyEvent is one event as the kernel writes it, its name padded.
func inotifyEvent(wd int32, mask uint32, name string) []byte {
	n := 0
	if name != "" {
		n = (len(name) + 16) &^ 15
	}
	b := binary.NativeEndian.AppendUint32(nil, uint32(wd))
	b = binary.NativeEndian.AppendUint32(b, mask)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = binary.NativeEndian.AppendUint32(b, uint32(n))
	return append(b, append([]byte(name), make([]byte, n-len(name))...)...)
}

// testWatch watches directory 1 whole and, of directory 2, the entry box.
func testWatch() *dirWatch { return &dirWatch{names: map[int32][]string{1: nil, 2: {"box"}}} }

// An event counts unless it names an entry beside the way: lost events,
// watches gone, unknown watches and cut events count.
func TestDirWatchCounts(t *testing.T) {
	cat := func(bs ...[]byte) []byte { return slices.Concat(bs...) }
	beside := inotifyEvent(2, syscall.IN_CREATE, "boxes")
	for name, tc := range map[string]struct {
		b    []byte
		want bool
	}{
		"beside":        {cat(beside, inotifyEvent(2, syscall.IN_MOVED_TO, "bo")), false},
		"the entry":     {cat(beside, inotifyEvent(2, syscall.IN_MOVED_FROM, "box")), true},
		"the directory": {inotifyEvent(1, syscall.IN_DELETE, "x"), true},
		"overflow":      {inotifyEvent(-1, syscall.IN_Q_OVERFLOW, ""), true},
		"watch gone":    {cat(beside, inotifyEvent(2, syscall.IN_IGNORED, "")), true},
		"moved":         {inotifyEvent(2, syscall.IN_MOVE_SELF, ""), true},
		"unknown watch": {inotifyEvent(3, syscall.IN_CREATE, "boxes"), true},
		"cut header":    {cat(beside, beside[:10]), true},
		"cut name":      {beside[:20], true},
		"name too long": {cat(beside[:12], []byte{255, 255, 255, 255}), true},
	} {
		if got := testWatch().counts(tc.b); got != tc.want {
			t.Errorf("%s: counts = %t, want %t", name, got, tc.want)
		}
	}
}

// Whatever the bytes, counts does not panic, and what it lets pass is
// whole events: one that counts after them still counts.
func FuzzDirWatchCounts(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		w := testWatch()
		if !w.counts(b) && !w.counts(append(slices.Clip(b), inotifyEvent(2, syscall.IN_CREATE, "box")...)) {
			t.Fatalf("an event after %x does not count", b)
		}
	})
}

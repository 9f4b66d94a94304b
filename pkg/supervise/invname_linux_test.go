package supervise

import (
	"strconv"
	"testing"
)

// An invocation cgroup's name gives its maker's pid and start time back
// (the older form, its pid only, flagged old); anything else is no
// invocation cgroup.
func TestInvMaker(t *testing.T) {
	for name, want := range map[string][3]uint64{ // pid, start, old
		"sbx-12-345-6": {12, 345, 0},
		"sbx-1-0-1":    {1, 0, 0},
		"sbx-77-3":     {77, 0, 1},
	} {
		pid, start, old, ok := invMaker(name)
		if !ok || uint64(pid) != want[0] || start != want[1] || old != (want[2] == 1) {
			t.Errorf("%s: %d %d %v %v", name, pid, start, old, ok)
		}
	}
	for _, bad := range []string{"sbx-", "sbx-1", "sbx-0-1-1", "sbx-01-1-1", "sbx-1--1", "sbx-1-2-3-4", "sbx-4194305-1-1",
		"sbx--1-1", "sbx-1-x-1", "supervisor", "sbx-1-99999999999999999999-1"} {
		if _, _, _, ok := invMaker(bad); ok {
			t.Errorf("%q taken for an invocation cgroup", bad)
		}
	}
}

// FuzzInvMaker: any name parses without a panic, to a pid in range; a
// name of the current form reads back as the same name.
func FuzzInvMaker(f *testing.F) {
	for _, s := range []string{"sbx-12-345-6", "sbx-77-3", "sbx-1-2-3-4", "supervisor"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		pid, start, old, ok := invMaker(name)
		if !ok {
			return
		}
		if pid <= 0 || pid > 1<<22 {
			t.Fatalf("%q: pid %d", name, pid)
		}
		if !old && invPrefix+strconv.Itoa(pid)+"-"+strconv.FormatUint(start, 10) != name[:len(name)-len(lastPart(name))-1] {
			t.Fatalf("%q does not read back", name)
		}
	})
}

func lastPart(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '-' {
			return s[i+1:]
		}
	}
	return s
}

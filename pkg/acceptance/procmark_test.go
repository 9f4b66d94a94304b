package acceptance

import (
	"bytes"
	"crypto/rand"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A sandboxed plugin or scoped check can write nothing the test reads
// (docs/sandbox.md), so it cannot report the PIDs of what it starts in a
// file. Instead it starts its long-lived children as "sleep <marker>",
// where marker is a fractional duration unique to the test (GNU sleep
// accepts fractions), and the test finds them by that exact argument in
// /proc/<pid>/cmdline, which every process may read; the plugin is their
// parent. Where the plugin or check must wait for the test, the test
// creates a flag file in a directory the Worker lists in
// sandbox_read_paths, so the sandbox lets it be read and nothing else.

// newMarker returns a fresh sleep argument: 300 seconds and 18 random
// decimal digits.
func newMarker(t testing.TB) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(1e18))
	if err != nil {
		t.Fatal(err)
	}
	return "300." + strings.Repeat("0", 18-len(n.String())) + n.String()
}

// readableDir returns a fresh canonical directory (sandbox_read_paths
// entries must be canonical) for the test's flag files.
func readableDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// raise creates the flag file path.
func raise(t testing.TB, path string) {
	t.Helper()
	must(t, os.WriteFile(path, nil, 0o644))
}

// marked returns the live processes whose command line is exactly
// "sleep <marker>", each mapped to its parent's PID.
func marked(marker string) map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	want := []byte(marker + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv0, rest, ok := bytes.Cut(b, []byte{0})
		if !ok || filepath.Base(string(argv0)) != "sleep" || !bytes.Equal(rest, want) {
			continue
		}
		if ppid, ok := parentOf(pid); ok && alive(pid) {
			out[pid] = ppid
		}
	}
	return out
}

// parentOf reads a process's parent PID from /proc/<pid>/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": comm may hold anything but ends at
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// waitMarked waits (bounded) until n live processes carry marker and
// returns their PIDs followed by their distinct parents' PIDs.
func waitMarked(t testing.TB, marker string, n int) []int {
	t.Helper()
	guard := time.Now().Add(60 * time.Second)
	for {
		m := marked(marker)
		if len(m) >= n {
			var kids, parents []int
			for pid, ppid := range m {
				kids = append(kids, pid)
				if !slices.Contains(parents, ppid) {
					parents = append(parents, ppid)
				}
			}
			return append(kids, parents...)
		}
		if time.Now().After(guard) {
			t.Fatalf("never saw %d processes running sleep %s (saw %d)", n, marker, len(m))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

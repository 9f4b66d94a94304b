// Package testseed reads the seed files that a package's tests and fuzz
// targets share from its testdata directory. It is imported by tests only.
package testseed

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Read returns the contents of the files matching pattern (a
// filepath.Glob pattern relative to the test's package directory, such as
// "testdata/seed/*.json"), keyed by base name. It fails tb when nothing
// matches or a file cannot be read.
func Read(tb testing.TB, pattern string) map[string][]byte {
	tb.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no seed files match %s", pattern)
	}
	out := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// Add adds the files matching pattern to f's seed corpus in name order.
func Add(f *testing.F, pattern string) {
	f.Helper()
	seeds := Read(f, pattern)
	names := make([]string, 0, len(seeds))
	for name := range seeds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f.Add(seeds[name])
	}
}

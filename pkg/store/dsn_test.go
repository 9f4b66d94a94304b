package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	accept := []struct {
		dsn    string
		memory bool
		path   string
	}{
		{":memory:", true, ""},
		{"file::memory:", true, ""},
		{"file::memory:?cache=private", true, ""},
		{"file::memory:?cache=shared", true, ""},
		{"file::memory:?mode=memory&cache=shared", true, ""},
		{"file:named?mode=memory", true, ""},
		{"file:named-db_1.x?mode=memory&cache=shared", true, ""},
		{"file:?mode=memory", true, ""},
		{"file:?cache=private&mode=memory", true, ""},
		{"/srv/forge/state/forge.db", false, "/srv/forge/state/forge.db"},
		{"state/forge.db", false, filepath.Join(wd, "state/forge.db")},
		{"forge.db", false, filepath.Join(wd, "forge.db")},
		{"a.b/..c/forge..db", false, filepath.Join(wd, "a.b/..c/forge..db")},
		{"weird?name#x.db", false, filepath.Join(wd, "weird?name#x.db")},
		{"file:///srv/forge/state/forge.db", false, "/srv/forge/state/forge.db"},
		{"file:///srv/forge/state/forge.db?mode=rwc&cache=private", false, "/srv/forge/state/forge.db"},
		{"file:///srv/forge/state/forge.db?cache=shared", false, "/srv/forge/state/forge.db"},
		{"file:/srv/forge.db?mode=rwc", false, "/srv/forge.db"},
		{"file:rel/forge.db", false, filepath.Join(wd, "rel/forge.db")},
		{"file:sp%20ace.db", false, filepath.Join(wd, "sp ace.db")},
	}
	for _, c := range accept {
		t.Run("accept "+c.dsn, func(t *testing.T) {
			loc, err := parseDSN(c.dsn)
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if loc.memory != c.memory || loc.path != c.path {
				t.Fatalf("got %+v", loc)
			}
			if loc.memory && loc.driver != c.dsn {
				t.Fatalf("memory driver DSN changed: %q", loc.driver)
			}
		})
	}
	reject := []string{
		"",
		":memory",
		":foo.db",
		"file:",
		"file:?",
		"file:x.db?",
		"file://localhost/srv/forge.db",
		"file://srv/forge.db",
		"file:///srv/forge.db?mode=ro",
		"file:///srv/forge.db?mode=rw",
		"file:///srv/forge.db?mode=rwc&mode=rwc",
		"file:///srv/forge.db?cache=shared&cache=shared",
		"file:///srv/forge.db?cache=none",
		"file:///srv/forge.db?vfs=unix-none",
		"file:///srv/forge.db?_pragma=journal_mode(DELETE)",
		"file:///srv/forge.db?immutable=1",
		"file:///srv/forge.db?mode=rwc&",
		"file:///srv/forge.db?=x",
		"file:///srv/forge.db?mode",
		"file:///srv/forge.db#frag",
		"file:///srv/%zz.db",
		"file:///srv/%00.db",
		"file:///srv/%4",
		"file::memory:?mode=rwc",
		"file::memory:?cache=shared&cache=private",
		"file:/abs/name?mode=memory",
		"file:na me?mode=memory",
		"file:///srv/dir/",
		"/srv/dir/",
		"/srv/..",
		"/",
		".",
		"nul\x00byte.db",
		// Non-canonical spellings of a file path (plain and file: URI).
		"./a/../forge.db",
		"./forge.db",
		"/srv/state/./forge.db",
		"/srv/state//forge.db",
		"/srv/x/../state/forge.db",
		"//srv/state/forge.db",
		"state/../forge.db",
		"file:///srv/state/./forge.db",
		"file:///srv/state//forge.db?mode=rwc",
		"file:///srv/x/../state/forge.db",
		"file:/srv/%2e/forge.db",
		"file:///srv/state%2F%2Fforge.db",
		"file:./forge.db",
		strings.Repeat("a", 13000),
		"/" + strings.Repeat("a", 5000),
	}
	for _, dsn := range reject {
		t.Run("reject "+dsn, func(t *testing.T) {
			loc, err := parseDSN(dsn)
			if err == nil {
				t.Fatalf("accepted as %+v", loc)
			}
			if !errors.Is(err, ErrInvalidDSN) {
				t.Fatalf("error %v is not ErrInvalidDSN", err)
			}
			if loc != (location{}) {
				t.Fatal("value returned with error")
			}
			if len(dsn) > 10 && strings.Contains(err.Error(), dsn[6:]) {
				t.Fatalf("error echoes the DSN: %v", err)
			}
			if strings.Contains(err.Error(), "srv") {
				t.Fatalf("error echoes the path: %v", err)
			}
		})
	}
}

func TestFileURIRoundTrip(t *testing.T) {
	for _, p := range []string{"/a/b.db", "/sp ace/q?uestion#hash%pct.db", "/ünï/x.db"} {
		loc, err := parseDSN(fileURI(p))
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if loc.path != p {
			t.Fatalf("round trip %q -> %q", p, loc.path)
		}
	}
}

// seeds returns the contents of the seed files in testdata/dir.
func seeds(f *testing.F, dir string) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if len(paths) == 0 {
		f.Fatal("no seeds")
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func FuzzParseDSN(f *testing.F) {
	for _, b := range seeds(f, "dsn") {
		f.Add(strings.TrimSuffix(string(b), "\n"))
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		loc, err := parseDSN(dsn)
		if err != nil {
			if loc != (location{}) {
				t.Fatal("value returned with error")
			}
			var de *DSNError
			if !errors.As(err, &de) {
				t.Fatalf("untyped error %v", err)
			}
			if len(dsn) >= 8 && strings.Contains(err.Error(), dsn) {
				t.Fatal("error echoes the DSN")
			}
			return
		}
		if loc.memory {
			if loc.driver != dsn || loc.path != "" {
				t.Fatalf("memory location %+v", loc)
			}
			return
		}
		if !filepath.IsAbs(loc.path) || filepath.Clean(loc.path) != loc.path || strings.IndexByte(loc.path, 0) >= 0 {
			t.Fatalf("path not absolute and clean: %q", loc.path)
		}
		// The URI the store hands SQLite names the same file.
		again, err := parseDSN(fileURI(loc.path))
		if err != nil || again.path != loc.path {
			t.Fatalf("fileURI round trip: %q -> %+v, %v", loc.path, again, err)
		}
	})
}

package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// minSQLite is the first SQLite release without the WAL-reset corruption
// bug (3.7.0 through 3.51.2), which a checkpointer connection beside a
// writer, as the store runs, can trigger.
var minSQLite = [3]int{3, 51, 3}

func TestEmbeddedSQLiteHasWALResetFix(t *testing.T) {
	s, _ := openFile(t)
	var v string
	if err := s.rdb.QueryRowContext(context.Background(), "SELECT sqlite_version()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	got, ok := parseSQLiteVersion(v)
	if !ok {
		t.Fatalf("sqlite_version() = %q, not major.minor.patch", v)
	}
	for i := range got {
		if got[i] != minSQLite[i] {
			if got[i] < minSQLite[i] {
				t.Fatalf("embedded SQLite %s is older than %d.%d.%d", v, minSQLite[0], minSQLite[1], minSQLite[2])
			}
			break
		}
	}
}

func parseSQLiteVersion(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

func TestParseSQLiteVersion(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
		v  [3]int
	}{{"3.51.3", true, [3]int{3, 51, 3}}, {"3.52.0", true, [3]int{3, 52, 0}}, {"3.51", false, [3]int{}}, {"3.x.1", false, [3]int{}}} {
		got, ok := parseSQLiteVersion(c.in)
		if ok != c.ok || (ok && got != c.v) {
			t.Errorf("parseSQLiteVersion(%q) = %v, %v", c.in, got, ok)
		}
	}
}

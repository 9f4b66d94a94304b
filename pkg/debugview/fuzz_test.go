package debugview

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func seeds(f *testing.F, glob string) {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("testdata", "seed", glob))
	if len(paths) == 0 {
		f.Fatalf("no seeds for %s", glob)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.TrimRight(string(b), "\n"))
	}
}

// FuzzCursor: opening never panics, and the only strings accepted are the
// exact cursors this codec would issue for the decoded position.
func FuzzCursor(f *testing.F) {
	seeds(f, "cursor-*.txt")
	var c cursorCodec
	copy(c.key[:], "fixed fuzz key, not a secret....")
	// Seed with real cursors under this key as well.
	f.Add(c.jobsCursor("j_0001"))
	f.Add(c.lanesCursor("worker-1#1"))
	f.Add(c.eventsCursor("j_0001", 25))
	f.Fuzz(func(t *testing.T, s string) {
		if id, err := c.jobsPosition(s); err == nil && c.jobsCursor(id) != s {
			t.Fatal("accepted a jobs cursor that was not issued")
		}
		if lane, err := c.lanesPosition(s); err == nil && c.lanesCursor(lane) != s {
			t.Fatal("accepted a lanes cursor that was not issued")
		}
		if seq, err := c.eventsPosition("j_0001", s); err == nil && c.eventsCursor("j_0001", seq) != s {
			t.Fatal("accepted an events cursor that was not issued")
		}
	})
}

// FuzzParseQuery: never panics; accepted queries have a limit in range.
func FuzzParseQuery(f *testing.F) {
	seeds(f, "query-*.txt")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseQuery(raw)
		if err != nil {
			return
		}
		if q.limit < 1 || q.limit > maxLimit || len(q.cursor) > 2*maxCursorLen {
			t.Fatalf("accepted out-of-range query %+v", q)
		}
	})
}

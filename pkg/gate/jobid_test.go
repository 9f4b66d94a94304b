package gate

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

func TestJobIDsSortBySubmitTime(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	t0 := time.UnixMilli(1_764_000_000_123)
	a, b := jobIDAt(t0), jobIDAt(t0)
	c := jobIDAt(t0.Add(time.Millisecond))
	for _, id := range []string{a, b, c, newJobID()} {
		if !hex32.MatchString(id) || !ident.ValidRef(id) {
			t.Fatalf("job id %q is not 32 lowercase hex digits", id)
		}
	}
	if a == b {
		t.Fatal("two job ids of the same millisecond are equal")
	}
	if want := fmt.Sprintf("%012x", t0.UnixMilli()); a[:12] != want {
		t.Fatalf("job id %q does not start with the time %s", a, want)
	}
	if !(a < c && b < c) {
		t.Fatalf("a later job's id %q does not sort after %q and %q", c, a, b)
	}
}

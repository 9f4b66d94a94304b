package doctor

import (
	"errors"
	"strings"
	"testing"
)

// worker-sandbox at every Landlock ABI (injected): the default passes
// from ABI 6 on only; "landlock-unscoped" fails at every ABI (below 4
// because the Worker refuses it, from 3 on because it is the weaker
// sandbox, or one this kernel does not need); "none" fails; a kernel
// without the metadata guard fails every sandboxed mode.
func TestSandboxVerdict(t *testing.T) {
	ok := func() error { return nil }
	for _, tc := range []struct {
		mode string
		abi  int
		says string // "" passes
	}{
		{"", 7, ""}, {"landlock", 6, ""},
		{"landlock", 5, "refuses to start"}, {"", 3, "refuses to start"}, {"landlock", 1, "refuses to start"},
		{"landlock", 0, "not available"},
		{"landlock-unscoped", 5, "can signal"}, {"landlock-unscoped", 4, "can signal"},
		{"landlock-unscoped", 3, "refuses to start"}, {"landlock-unscoped", 2, "refuses to start"}, {"landlock-unscoped", 0, "not available"},
		{"landlock-unscoped", 6, "does not need"}, {"landlock-unscoped", 7, "does not need"},
		{"none", 7, "unconfined"}, {"Landlock", 7, "invalid"},
	} {
		got := sandboxVerdict(tc.mode, tc.abi, ok)
		if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
			t.Errorf("%q at ABI %d: %q, want %q", tc.mode, tc.abi, got, tc.says)
		}
	}
	refused := func() error { return errors.New("operation not permitted") }
	for _, mode := range []string{"landlock", "landlock-unscoped"} {
		if got := sandboxVerdict(mode, 7, refused); !strings.Contains(got, "metadata guard") {
			t.Errorf("%s without the guard: %q", mode, got)
		}
	}
}

package cli

import (
	"strings"
	"testing"
)

// install and doctor use DECISIONS 13's codes: usage is exit 1, and no
// argument value is echoed.
func TestInstallAndDoctorUsageIsExitOne(t *testing.T) {
	commit := strings.Repeat("a", 40)
	sum := strings.Repeat("b", 64)
	cases := map[string][]string{
		"no flags":        {"install"},
		"repeated":        {"install", "--version", "v1.0.0", "--version", "v1.0.0", "--commit", commit, "--asset-dir", "/x", "--sha256sums-sha256", sum},
		"bad version":     {"install", "--version", "v1.0.0-rc1", "--commit", commit, "--asset-dir", "/x", "--sha256sums-sha256", sum},
		"relative dir":    {"install", "--version", "v1.0.0", "--commit", commit, "--asset-dir", "secretdir", "--sha256sums-sha256", sum},
		"positional":      {"install", "--version", "v1.0.0", "--commit", commit, "--asset-dir", "/x", "--sha256sums-sha256", sum, "extra"},
		"bool with value": {"install", "--version", "v1.0.0", "--commit", commit, "--asset-dir", "/x", "--sha256sums-sha256", sum, "--upgrade=false"},
		"doctor args":     {"doctor", "secretdir"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			r := runForge(t, nil, "", args...)
			wantCode(t, r, 1)
			if r.stdout != "" || !strings.Contains(r.stderr, "error:") || strings.Contains(r.stderr, "secretdir") || strings.Contains(r.stderr, "rc1") {
				t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}
}

package install

import (
	"strings"
	"testing"
)

// Only the exact --name and --name=value forms of the flags are
// accepted; everything else is a usage error.
func TestParseArgsIsStrict(t *testing.T) {
	c := strings.Repeat("a", 40)
	d := strings.Repeat("b", 64)
	ok := []string{"--version", "v1.2.3", "--commit", c, "--asset-dir", "/srv/assets", "--sha256sums-sha256", d}
	with := func(extra ...string) []string { return append(append([]string{}, ok...), extra...) }
	set := func(i int, v string) []string { a := with(); a[i] = v; return a }
	good := map[string][]string{
		"separate values": ok,
		"= values":        {"--version=v1.2.3", "--commit=" + c, "--asset-dir=/srv/assets", "--sha256sums-sha256=" + d},
		"all switches":    with("--enable-now", "--run-as-root", "--upgrade"),
		"any order":       {"--upgrade", "--sha256sums-sha256", d, "--asset-dir=/srv/assets", "--enable-now", "--commit", c, "--version", "v10.0.0"},
	}
	for name, args := range good {
		if _, err := ParseArgs(args); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string][]string{
		"nothing":              nil,
		"missing commit":       {"--version", "v1.2.3", "--asset-dir", "/srv/assets", "--sha256sums-sha256", d},
		"missing value at end": {"--commit", c, "--asset-dir", "/srv/assets", "--sha256sums-sha256", d, "--version"},
		"repeated value flag":  with("--version", "v1.2.3"),
		"repeated = form":      with("--commit=" + c),
		"repeated switch":      with("--upgrade", "--upgrade"),
		"unknown flag":         with("--force"),
		"unknown = flag":       with("--root=/"),
		"single dash":          set(0, "-version"),
		"single dash switch":   with("-enable-now"),
		"triple dash":          set(0, "---version"),
		"switch with true":     with("--enable-now=true"),
		"switch with 1":        with("--upgrade=1"),
		"switch with empty":    with("--run-as-root="),
		"terminator":           with("--"),
		"positional":           with("extra"),
		"help":                 with("--help"),
		"short help":           with("-h"),
		"version v1.2":         set(1, "v1.2"),
		"version v01.2.3":      set(1, "v01.2.3"),
		"version rc":           set(1, "v1.2.3-rc1"),
		"version build":        set(1, "v1.2.3+b"),
		"version no v":         set(1, "1.2.3"),
		"version V":            set(1, "V1.2.3"),
		"version spaces":       set(1, " v1.2.3"),
		"version empty":        set(1, ""),
		"commit upper":         set(3, strings.Repeat("A", 40)),
		"commit 39":            set(3, strings.Repeat("a", 39)),
		"commit 41":            set(3, strings.Repeat("a", 41)),
		"commit sha256":        set(3, d),
		"relative dir":         set(5, "srv/assets"),
		"dot dir":              set(5, "."),
		"unclean dir":          set(5, "/srv/../assets"),
		"trailing slash dir":   set(5, "/srv/assets/"),
		"double slash dir":     set(5, "//srv/assets"),
		"empty dir":            set(5, ""),
		"NUL in dir":           set(5, "/srv/as\x00sets"),
		"newline in dir":       set(5, "/srv/assets\n"),
		"sums upper":           set(7, strings.Repeat("B", 64)),
		"sums 63":              set(7, strings.Repeat("b", 63)),
		"sums newline":         set(7, d+"\n"),
		"empty = value":        {"--version=", "--commit=" + c, "--asset-dir=/srv/assets", "--sha256sums-sha256=" + d},
	}
	for name, args := range bad {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("%s: %q accepted", name, args)
		} else if strings.Contains(err.Error(), "/srv") || strings.Contains(err.Error(), "aaaa") {
			t.Errorf("%s: error echoes a value: %v", name, err)
		}
	}
}

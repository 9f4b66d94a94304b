package daemonargs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := []struct {
		args    []string
		config  string
		version bool
	}{
		{[]string{"-config", "/etc/gate.json"}, "/etc/gate.json", false},
		{[]string{"--config=/etc/gate.json"}, "/etc/gate.json", false},
		{[]string{"--version"}, "", true},
		{[]string{"-version"}, "", true},
	}
	for _, tc := range good {
		c, v, err := Parse(tc.args)
		if err != nil || c != tc.config || v != tc.version {
			t.Errorf("%q: %q %v %v", tc.args, c, v, err)
		}
	}
	bad := [][]string{
		nil,
		{"-config"},
		{"-config", ""},
		{"-config", "a", "-config", "b"},
		{"--version", "--version"},
		{"--version", "-config", "a"},
		{"--version=false"},
		{"-config", "a", "extra"},
		{"-unknown"},
		{"-h"},
	}
	for _, args := range bad {
		if _, _, err := Parse(args); err != ErrUsage {
			t.Errorf("%q accepted: %v", args, err)
		}
	}
}

// FuzzParse: any command line (arguments split at NUL) either yields
// exactly one of a non-empty config path and --version, or ErrUsage.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "args", "*.args"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		c, v, err := Parse(args)
		if err != nil {
			if err != ErrUsage || c != "" || v {
				t.Fatalf("%q: %q %v %v", args, c, v, err)
			}
			return
		}
		if (c != "") == v {
			t.Fatalf("%q: config %q and version %v", args, c, v)
		}
	})
}

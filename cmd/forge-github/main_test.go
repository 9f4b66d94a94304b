package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunUsageVersionAndConfigErrors(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, 2, "", "usage:"},
		{[]string{"-config", "a", "-config", "b"}, 2, "", "usage:"},
		{[]string{"-config", "a", "--version"}, 2, "", "usage:"},
		{[]string{"--version"}, 0, "forge-github ", ""},
		{[]string{"-config", filepath.Join(t.TempDir(), "missing.json")}, 1, "", "forge-github: error: config_unreadable"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb, getenv)
		if got := exitCode(err); got != tc.code {
			t.Errorf("%v: exit %d, want %d (%v)", tc.args, got, tc.code, err)
		}
		if !strings.HasPrefix(out.String(), tc.stdout) || tc.stdout == "" && out.Len() != 0 {
			t.Errorf("%v: stdout %q", tc.args, out.String())
		}
		if !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%v: stderr %q", tc.args, errb.String())
		}
	}
}

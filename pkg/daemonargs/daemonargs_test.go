package daemonargs

import "testing"

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

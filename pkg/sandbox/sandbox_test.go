package sandbox_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

func TestPolicyCheck(t *testing.T) {
	good := &sandbox.Policy{Rules: []sandbox.Rule{{Path: "/usr", Access: sandbox.ReadOnly}, {Path: "/w", Access: sandbox.ReadWrite, Optional: true}}}
	if err := good.Check(); err != nil {
		t.Fatalf("good policy: %v", err)
	}
	shared := []sandbox.Rule{{Path: "/etc", Access: sandbox.ReadOnly}}
	readable := []sandbox.Rule{{Path: "/etc/ssl", Access: sandbox.ReadOnly}}
	if _, err := sandbox.NewShared(shared, readable, "stamp"); err != nil {
		t.Fatalf("good shared rules: %v", err)
	}
	for name, r := range map[string]sandbox.Rule{
		"relative":   {Path: "usr", Access: sandbox.ReadOnly},
		"unclean":    {Path: "/usr/../etc", Access: sandbox.ReadOnly},
		"trailing":   {Path: "/usr/", Access: sandbox.ReadOnly},
		"empty":      {Access: sandbox.ReadOnly},
		"nul":        {Path: "/us\x00r", Access: sandbox.ReadOnly},
		"no access":  {Path: "/usr"},
		"bad access": {Path: "/usr", Access: 4},
	} {
		if (&sandbox.Policy{Rules: []sandbox.Rule{r}}).Check() == nil {
			t.Errorf("%s rule accepted", name)
		}
		if _, err := sandbox.NewShared([]sandbox.Rule{r}, nil, ""); err == nil {
			t.Errorf("%s shared rule accepted", name)
		}
		if _, err := sandbox.NewShared(nil, []sandbox.Rule{r}, ""); err == nil {
			t.Errorf("%s readable rule accepted", name)
		}
	}
	if (*sandbox.Policy)(nil).Check() == nil {
		t.Error("nil policy accepted")
	}
	many := make([]sandbox.Rule, sandbox.MaxRules+1)
	for i := range many {
		many[i] = sandbox.Rule{Path: "/usr", Access: sandbox.ReadOnly}
	}
	if (&sandbox.Policy{Rules: many}).Check() == nil {
		t.Error("too many rules accepted")
	}
	if _, err := sandbox.NewShared(many, nil, ""); err == nil {
		t.Error("too many shared rules accepted")
	}
	for _, s := range []string{"a\x00b", strings.Repeat("x", sandbox.MaxPathBytes+1)} {
		if _, err := sandbox.NewShared(shared, nil, s); err == nil {
			t.Errorf("stamp of %d bytes accepted", len(s))
		}
	}
}

// A Shared's Key tells it from any other with other rules, readable rules
// or stamp, and is the same for the same three.
func TestSharedKey(t *testing.T) {
	r := func(paths ...string) []sandbox.Rule {
		var out []sandbox.Rule
		for _, p := range paths {
			out = append(out, sandbox.Rule{Path: p, Access: sandbox.ReadOnly})
		}
		return out
	}
	mk := func(rules, readable []sandbox.Rule, stamp string) string {
		s, err := sandbox.NewShared(rules, readable, stamp)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Key()) != sandbox.KeyBytes {
			t.Fatalf("key of %d bytes", len(s.Key()))
		}
		return s.Key()
	}
	base := mk(r("/usr", "/etc"), r("/etc/ssl"), "1")
	if mk(r("/usr", "/etc"), r("/etc/ssl"), "1") != base {
		t.Error("the same Shared has another key")
	}
	optional := r("/usr", "/etc")
	optional[1].Optional = true
	device := r("/usr", "/etc")
	device[1].Access = sandbox.Device
	others := map[string]string{
		"rules":     mk(r("/usr"), r("/etc/ssl"), "1"),
		"order":     mk(r("/etc", "/usr"), r("/etc/ssl"), "1"),
		"moved":     mk(r("/usr"), r("/etc", "/etc/ssl"), "1"),
		"readable":  mk(r("/usr", "/etc"), nil, "1"),
		"stamp":     mk(r("/usr", "/etc"), r("/etc/ssl"), "2"),
		"optional":  mk(optional, r("/etc/ssl"), "1"),
		"access":    mk(device, r("/etc/ssl"), "1"),
		"path join": mk(r("/usr", "/etc /x"), r("/etc/ssl"), "1"),
	}
	seen := []string{base}
	for name, k := range others {
		if slices.Contains(seen, k) {
			t.Errorf("%s: same key as another Shared", name)
		}
		seen = append(seen, k)
	}
	if (*sandbox.Shared)(nil).Key() != "" {
		t.Error("nil Shared has a key")
	}
}

package sandbox_test

import (
	"testing"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

func TestPolicyCheck(t *testing.T) {
	good := &sandbox.Policy{Rules: []sandbox.Rule{{Path: "/usr", Access: sandbox.ReadOnly}, {Path: "/w", Access: sandbox.ReadWrite, Optional: true}},
		Readable: []sandbox.Rule{{Path: "/etc/ssl", Access: sandbox.ReadOnly}}}
	if err := good.Check(); err != nil {
		t.Fatalf("good policy: %v", err)
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
		if (&sandbox.Policy{Readable: []sandbox.Rule{r}}).Check() == nil {
			t.Errorf("%s readable rule accepted", name)
		}
	}
	if (*sandbox.Policy)(nil).Check() == nil {
		t.Error("nil policy accepted")
	}
	many := &sandbox.Policy{Rules: make([]sandbox.Rule, sandbox.MaxRules+1)}
	for i := range many.Rules {
		many.Rules[i] = sandbox.Rule{Path: "/usr", Access: sandbox.ReadOnly}
	}
	if many.Check() == nil {
		t.Error("too many rules accepted")
	}
}

package gate

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/intake"
)

// intakeConfig is the example config with repository 0 a public source
// with delivery and the given intake section.
func intakeConfig(t *testing.T, section any, f func(m map[string]any)) []byte {
	t.Helper()
	key := writeAppKey(t)
	return publicConfig(t, func(m map[string]any) {
		withDelivery(t, m, deliverySection(key))
		repo0(m)["intake"] = section
		if f != nil {
			f(m)
		}
	})
}

func TestIntakeConfigLoads(t *testing.T) {
	c, _, err := LoadConfig(bytes.NewReader(intakeConfig(t, map[string]any{}, nil)), testEnv(deliveryEnv()))
	if err != nil {
		t.Fatal(err)
	}
	want := intake.Settings{Label: "agent-forge", Command: "/forge", Merge: "review", MaxFollowups: 5}
	if got := c.Repositories[0].Intake.Resolve(); !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults %+v", got)
	}
	section := map[string]any{"label": "forge: do it", "command": "/agent", "checks": [][]string{{"go", "test", "./..."}},
		"merge": "auto", "max_followups": 0}
	c, _, err = LoadConfig(bytes.NewReader(intakeConfig(t, section, nil)), testEnv(deliveryEnv()))
	if err != nil {
		t.Fatal(err)
	}
	want = intake.Settings{Label: "forge: do it", Command: "/agent", Checks: [][]string{{"go", "test", "./..."}}, Merge: "auto"}
	if got := c.Repositories[0].Intake.Resolve(); !reflect.DeepEqual(got, want) {
		t.Fatalf("settings %+v", got)
	}
	// Without the section no repository has intake.
	c, _, err = LoadConfig(bytes.NewReader(publicConfig(t, nil)), testEnv(defaultEnv()))
	if err != nil || c.Repositories[0].Intake != nil {
		t.Fatalf("without intake: %v", err)
	}
}

func TestIntakeConfigRejects(t *testing.T) {
	const secret = "s3cr3t-value"
	many := make([][]string, 33)
	for i := range many {
		many[i] = []string{"true"}
	}
	cases := []struct {
		name, field string
		section     any
		f           func(m map[string]any)
	}{
		{"no delivery", "repositories[0].intake", map[string]any{}, func(m map[string]any) { delete(m, "delivery") }},
		{"static repository", "repositories[0].intake", map[string]any{}, func(m map[string]any) {
			delete(repo0(m), "repository_url")
			m["repositories"] = append(m["repositories"].([]any), map[string]any{"id": "pub", "default_branch": "main",
				"worker_pool": "coding", "execution": repo0(m)["execution"], "repository_url": testPublicURL})
		}},
		{"unknown field", "repositories[0].intake", map[string]any{"labels": secret}, nil},
		{"null label", "repositories[0].intake.label", map[string]any{"label": nil}, nil},
		{"empty label", "repositories[0].intake.label", map[string]any{"label": ""}, nil},
		{"long label", "repositories[0].intake.label", map[string]any{"label": strings.Repeat("é", 51)}, nil},
		{"label with comma", "repositories[0].intake.label", map[string]any{"label": "a," + secret}, nil},
		{"label bidi", "repositories[0].intake.label", map[string]any{"label": "fix\u202e" + secret}, nil},
		{"label spaced", "repositories[0].intake.label", map[string]any{"label": " " + secret}, nil},
		{"command without slash", "repositories[0].intake.command", map[string]any{"command": "forge"}, nil},
		{"command upper", "repositories[0].intake.command", map[string]any{"command": "/Forge"}, nil},
		{"command bare slash", "repositories[0].intake.command", map[string]any{"command": "/"}, nil},
		{"command space", "repositories[0].intake.command", map[string]any{"command": "/forge " + secret}, nil},
		{"checks empty argv", "repositories[0].intake.checks", map[string]any{"checks": [][]string{{}}}, nil},
		{"checks empty program", "repositories[0].intake.checks", map[string]any{"checks": [][]string{{"", secret}}}, nil},
		{"checks NUL", "repositories[0].intake.checks", map[string]any{"checks": [][]string{{"go", "a\x00" + secret}}}, nil},
		{"checks many", "repositories[0].intake.checks", map[string]any{"checks": many}, nil},
		{"checks not lists", "repositories[0].intake.checks[0]", map[string]any{"checks": []string{secret}}, nil},
		{"merge other", "repositories[0].intake.merge", map[string]any{"merge": secret}, nil},
		{"followups negative", "repositories[0].intake.max_followups", map[string]any{"max_followups": -1}, nil},
		{"followups many", "repositories[0].intake.max_followups", map[string]any{"max_followups": 101}, nil},
		{"followups text", "repositories[0].intake.max_followups", map[string]any{"max_followups": "5"}, nil},
		{"section not object", "repositories[0].intake", secret, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := LoadConfig(bytes.NewReader(intakeConfig(t, tc.section, tc.f)), testEnv(deliveryEnv()))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("got %v, want field %s", err, tc.field)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error carries the value: %v", err)
			}
		})
	}
}

// The merge policy of a repository's deliveries: review with intake by
// default, auto when the section says so or without intake.
func TestReviewPolicyFollowsIntake(t *testing.T) {
	for _, c := range []struct {
		name    string
		section any
		want    bool
	}{
		{"default", map[string]any{}, true},
		{"review", map[string]any{"merge": "review"}, true},
		{"auto", map[string]any{"merge": "auto"}, false},
		{"no intake", nil, false},
	} {
		cfg, _, err := LoadConfig(bytes.NewReader(intakeConfig(t, c.section, func(m map[string]any) {
			if c.section == nil {
				delete(repo0(m), "intake")
			}
		})), testEnv(deliveryEnv()))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := &cfg.Repositories[0]
		owner, name, ok := r.gitHubRepository()
		if !ok {
			t.Fatalf("%s: not a GitHub repository", c.name)
		}
		g := &Gate{repos: map[string]*RepositoryConfig{r.ID: r}}
		if got := g.reviewPolicy(delivery.Repo{Owner: owner, Name: name}); got != c.want {
			t.Fatalf("%s: review %v", c.name, got)
		}
		if g.reviewPolicy(delivery.Repo{Owner: owner, Name: name + "-other"}) {
			t.Fatalf("%s: another repository reviews", c.name)
		}
	}
}

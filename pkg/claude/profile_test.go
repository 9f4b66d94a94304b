package claude

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile([]byte(`{"version":1,"model":"claude-opus-4-6","effort":"max","provider":"corp-anthropic"}`))
	if err != nil || p != (Profile{Model: "claude-opus-4-6", Effort: "max", Provider: "corp-anthropic"}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if p, err := ParseProfile([]byte(`{"version":1}`)); err != nil || p != (Profile{}) {
		t.Fatalf("minimal profile: %+v, %v", p, err)
	}
	for name, doc := range map[string]string{
		"no version":        `{"model":"m"}`,
		"version 2":         `{"version":2}`,
		"unknown member":    `{"version":1,"permission_mode":"bypassPermissions"}`,
		"null":              `{"version":1,"model":null}`,
		"duplicate":         `{"version":1,"model":"a","model":"b"}`,
		"model flag":        `{"version":1,"model":"--dangerously-skip-permissions"}`,
		"model space":       `{"version":1,"model":"a b"}`,
		"effort":            `{"version":1,"effort":"ultra"}`,
		"provider upper":    `{"version":1,"provider":"Anthropic"}`,
		"provider url":      `{"version":1,"provider":"https://api.anthropic.com"}`,
		"provider empty":    `{"version":1,"provider":""}`,
		"provider object":   `{"version":1,"provider":{"id":"a"}}`,
		"trailing data":     `{"version":1} {}`,
		"not an object":     `[1]`,
		"canary in a value": `{"version":1,"model":"canary value"}`,
	} {
		_, err := ParseProfile([]byte(doc))
		var pe *agent.ProfileError
		if !errors.As(err, &pe) || strings.Contains(err.Error(), "canary") || !strings.HasPrefix(err.Error(), "claude profile: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"version":1,"model":"`+strings.Repeat("a", 17<<10)+`"}`), 0o600)
	for _, path := range []string{big, filepath.Join(dir, "missing.json"), dir} {
		if _, err := LoadProfile(path); err == nil || strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
	}
}

// TestParseProfileRefusesTheOldMembers: a profile written before the
// gateway (the key's variable, an upstream URL) is refused with what to
// write instead, naming no value.
func TestParseProfileRefusesTheOldMembers(t *testing.T) {
	for _, doc := range []string{
		`{"version":1,"api_key_env":"CORP_ANTHROPIC_KEY"}`,
		`{"version":1,"model":"claude-opus-4-6","base_url":"https://llm.example.com"}`,
		`{"version":1,"model":"claude-opus-4-6","effort":"high","api_key_env":"CORP_ANTHROPIC_KEY","base_url":"https://llm.example.com"}`,
	} {
		_, err := ParseProfile([]byte(doc))
		if err == nil || err.Error() != "claude profile: "+ReasonOldProfile ||
			strings.Contains(err.Error(), "CORP") || strings.Contains(err.Error(), "example") {
			t.Errorf("%s: %v", doc, err)
		}
	}
	for _, want := range []string{`worker.json's "providers"`, "key_env", `"provider":"ID"`} {
		if !strings.Contains(ReasonOldProfile, want) {
			t.Errorf("the refusal does not say %s", want)
		}
	}
}

// FuzzParseProfile: never panics; errors are ProfileErrors; an accepted
// profile only holds values its rules allow.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"version":1,"model":"claude-opus-4-6","effort":"high","provider":"anthropic"}`))
	f.Add([]byte(`{"version":1,"api_key_env":"K","base_url":"http://127.0.0.1:8080"}`))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			var pe *agent.ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if p.Model != "" && !agent.ValidModel(p.Model) || p.Effort != "" && !agent.OneOf(p.Effort, Efforts) ||
			p.Provider != "" && !agent.ValidProviderID(p.Provider) {
			t.Fatalf("accepted %+v", p)
		}
	})
}

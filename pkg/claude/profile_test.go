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
	p, err := ParseProfile([]byte(`{"version":1,"model":"claude-opus-4-6","effort":"max","api_key_env":"CORP_KEY","base_url":"https://llm.example.com"}`))
	if err != nil || p != (Profile{Model: "claude-opus-4-6", Effort: "max", KeyEnv: "CORP_KEY", BaseURL: "https://llm.example.com"}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if p, err := ParseProfile([]byte(`{"version":1}`)); err != nil || p.keyEnv() != DefaultKeyEnv {
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
		"key var reserved":  `{"version":1,"api_key_env":"CLAUDE_CONFIG_DIR"}`,
		"key var invalid":   `{"version":1,"api_key_env":"A-B"}`,
		"http remote":       `{"version":1,"base_url":"http://llm.example.com"}`,
		"user info":         `{"version":1,"base_url":"https://u:p@llm.example.com"}`,
		"query":             `{"version":1,"base_url":"https://llm.example.com/?k=v"}`,
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

// FuzzParseProfile: never panics; errors are ProfileErrors; an accepted
// profile only holds values its rules allow.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"version":1,"model":"claude-opus-4-6","effort":"high","api_key_env":"K","base_url":"http://127.0.0.1:8080"}`))
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
			p.BaseURL != "" && agent.CheckBaseURL(p.BaseURL) != "" || p.KeyEnv != "" && !agent.ValidKeyVar(p.KeyEnv, reservedEnvKeys) {
			t.Fatalf("accepted %+v", p)
		}
	})
}

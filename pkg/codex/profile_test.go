package codex

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
)

const fullProfile = `{"version":1,"model":"gpt-5.5","reasoning_effort":"high","provider":"corp-openai"}`

// testGateway is the gateway a run is handed in the tests (SelectGateway's
// answer for the provider corp-openai).
var testGateway = agent.Gateway{Provider: "corp-openai", BaseURL: agenttest.GatewayURL + "/corp-openai", Credential: agenttest.Credential}

func TestParseProfileAccepts(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want Profile
	}{
		{"empty", `{"version":1}`, Profile{}},
		{"model only", `{"version":1,"model":"llama3.1:8b"}`, Profile{Model: "llama3.1:8b"}},
		{"full", fullProfile, Profile{Model: "gpt-5.5", ReasoningEffort: "high", Provider: "corp-openai"}},
		{"provider only", `{"version":1,"provider":"openai"}`, Profile{Provider: "openai"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProfile([]byte(tc.doc))
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseProfileRejects(t *testing.T) {
	const canary = "canary-value-7f3a"
	tests := map[string]string{
		"not json":            `model = "x"`,
		"no version":          `{"model":"m"}`,
		"version 2":           `{"version":2}`,
		"version string":      `{"version":"1"}`,
		"unknown key":         `{"version":1,"mcp_servers":{}}`,
		"approval policy":     `{"version":1,"approval_policy":"` + canary + `"}`,
		"duplicate key":       `{"version":1,"model":"a","model":"b"}`,
		"null model":          `{"version":1,"model":null}`,
		"empty model":         `{"version":1,"model":""}`,
		"model with quote":    `{"version":1,"model":"a\"b` + canary + `"}`,
		"model with newline":  `{"version":1,"model":"a\nb"}`,
		"model starting dash": `{"version":1,"model":"-c"}`,
		"model too long":      `{"version":1,"model":"` + strings.Repeat("m", 129) + `"}`,
		"effort unknown":      `{"version":1,"reasoning_effort":"` + canary + `"}`,
		"provider null":       `{"version":1,"provider":null}`,
		"provider empty":      `{"version":1,"provider":""}`,
		"provider upper case": `{"version":1,"provider":"OpenAI"}`,
		"provider url":        `{"version":1,"provider":"https://llm.example.com/v1"}`,
		"provider number":     `{"version":1,"provider":1}`,
		"provider array":      `{"version":1,"provider":["openai"]}`,
		"provider too long":   `{"version":1,"provider":"` + strings.Repeat("p", 65) + `"}`,
		"provider escape":     `{"version":1,"provider":"a\u0000"}`,
		"trailing data":       `{"version":1}{}`,
		"array":               `[]`,
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseProfile([]byte(doc))
			var pe *agent.ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("accepted or wrong error type: %v", err)
			}
			if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "example") {
				t.Fatalf("error echoes a value: %q", err)
			}
		})
	}
}

// TestParseProfileRefusesTheOldProvider: a profile written before the
// gateway (a provider object with the upstream and the key's variable)
// is refused with what to write instead, naming no value.
func TestParseProfileRefusesTheOldProvider(t *testing.T) {
	for _, doc := range []string{
		`{"version":1,"provider":{"name":"Corp gateway","base_url":"https://llm.example.com/v1","wire_api":"responses","env_key":"CORP_LLM_KEY"}}`,
		`{"version":1,"model":"gpt-5.5","provider":{"name":"local","base_url":"http://127.0.0.1:8080/v1","wire_api":"responses"}}`,
		`{"version":1,"provider":{}}`,
	} {
		_, err := ParseProfile([]byte(doc))
		if err == nil || err.Error() != "codex profile: "+ReasonOldProvider ||
			strings.Contains(err.Error(), "CORP") || strings.Contains(err.Error(), "example") {
			t.Errorf("%s: %v", doc, err)
		}
	}
	for _, want := range []string{`worker.json's "providers"`, "key_env", `"provider":"ID"`} {
		if !strings.Contains(ReasonOldProvider, want) {
			t.Errorf("the refusal does not say %s", want)
		}
	}
}

func TestLoadProfileFileRules(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadProfile(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}
	if _, err := LoadProfile(dir); err == nil {
		t.Fatal("a directory accepted")
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, append([]byte(`{"version":1,"model":"m"}`), bytes.Repeat([]byte(" "), MaxProfileBytes)...), 0o600)
	if _, err := LoadProfile(big); err == nil {
		t.Fatal("oversized profile accepted")
	}
	good := filepath.Join(dir, "codex.json")
	os.WriteFile(good, []byte(fullProfile), 0o600)
	if p, err := LoadProfile(good); err != nil || p.Provider != "corp-openai" {
		t.Fatalf("%+v, %v", p, err)
	}
}

var updateConfig = os.Getenv("UPDATE_GOLDEN") == "1"

// TestConfigTOMLGolden pins the generated Codex configuration; the
// golden files were run through the real codex-cli 0.169.0 with
// --strict-config (scripts/codex-e2e.sh runs the full one on every CI
// run).
func TestConfigTOMLGolden(t *testing.T) {
	full, err := ParseProfile([]byte(fullProfile))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Profile{"config-default.toml": {}, "config-full.toml": full} {
		got := ConfigTOML(p, testGateway)
		path := filepath.Join("testdata", name)
		if updateConfig {
			os.WriteFile(path, got, 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s differs (UPDATE_GOLDEN=1 rewrites it):\n%s", name, got)
		}
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:    `"plain"`,
		`a"b\c`:    `"a\"b\\c"`,
		"nl\n\x7f": `"nl\u000A\u007F"`,
		"ünï":      `"ünï"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzParseProfile: never panics; an accepted profile only holds values
// its rules allow, and its configuration has no line a value could add.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(fullProfile))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"provider":{"name":"l","base_url":"http://127.0.0.1:1/v1","wire_api":"responses"}}`))
	f.Add([]byte(`{"version":1,"provider":"openai"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			var pe *agent.ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if p.Model != "" && !agent.ValidModel(p.Model) {
			t.Fatalf("model %q accepted", p.Model)
		}
		if p.ReasoningEffort != "" && !agent.OneOf(p.ReasoningEffort, ReasoningEfforts) {
			t.Fatalf("effort %q accepted", p.ReasoningEffort)
		}
		if p.Provider != "" && !agent.ValidProviderID(p.Provider) {
			t.Fatalf("provider %q accepted", p.Provider)
		}
		// model and effort each add exactly one line; nothing a value
		// holds can start another.
		want := bytes.Count(ConfigTOML(Profile{}, testGateway), []byte("\n"))
		if p.Model != "" {
			want++
		}
		if p.ReasoningEffort != "" {
			want++
		}
		if got := bytes.Count(ConfigTOML(p, testGateway), []byte("\n")); got != want {
			t.Fatalf("configuration has %d lines, want %d", got, want)
		}
	})
}

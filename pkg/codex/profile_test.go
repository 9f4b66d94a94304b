package codex

import (
	"bytes"
	"errors"
	"github.com/0k-lab/agent-forge/pkg/agent"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fullProfile = `{"version":1,"model":"gpt-5.5","reasoning_effort":"high",
 "provider":{"name":"Corp gateway","base_url":"https://llm.example.com/v1","wire_api":"responses","env_key":"CORP_LLM_KEY"}}`

func TestParseProfileAccepts(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want Profile
	}{
		{"empty", `{"version":1}`, Profile{}},
		{"model only", `{"version":1,"model":"llama3.1:8b"}`, Profile{Model: "llama3.1:8b"}},
		{"full", fullProfile, Profile{Model: "gpt-5.5", ReasoningEffort: "high", Provider: &Provider{
			Name: "Corp gateway", BaseURL: "https://llm.example.com/v1", WireAPI: "responses", EnvKey: "CORP_LLM_KEY"}}},
		{"loopback http without key", `{"version":1,"provider":{"name":"local","base_url":"http://127.0.0.1:8080/v1","wire_api":"responses"}}`,
			Profile{Provider: &Provider{Name: "local", BaseURL: "http://127.0.0.1:8080/v1", WireAPI: "responses"}}},
		{"ipv6 loopback", `{"version":1,"provider":{"name":"l","base_url":"http://[::1]:9/v1","wire_api":"responses"}}`,
			Profile{Provider: &Provider{Name: "l", BaseURL: "http://[::1]:9/v1", WireAPI: "responses"}}},
		{"localhost", `{"version":1,"provider":{"name":"l","base_url":"http://localhost/v1","wire_api":"responses"}}`,
			Profile{Provider: &Provider{Name: "l", BaseURL: "http://localhost/v1", WireAPI: "responses"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProfile([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != tc.want.Model || got.ReasoningEffort != tc.want.ReasoningEffort ||
				(got.Provider == nil) != (tc.want.Provider == nil) ||
				(got.Provider != nil && *got.Provider != *tc.want.Provider) {
				t.Fatalf("got %+v (%+v), want %+v", got, got.Provider, tc.want)
			}
		})
	}
}

func TestParseProfileRejects(t *testing.T) {
	const canary = "canary-value-7f3a"
	prov := func(fields string) string { return `{"version":1,"provider":{` + fields + `}}` }
	ok := `"name":"g","wire_api":"responses"`
	tests := map[string]string{
		"not json":               `model = "x"`,
		"no version":             `{"model":"m"}`,
		"version 2":              `{"version":2}`,
		"version string":         `{"version":"1"}`,
		"unknown key":            `{"version":1,"mcp_servers":{}}`,
		"approval policy":        `{"version":1,"approval_policy":"` + canary + `"}`,
		"duplicate key":          `{"version":1,"model":"a","model":"b"}`,
		"null model":             `{"version":1,"model":null}`,
		"empty model":            `{"version":1,"model":""}`,
		"model with quote":       `{"version":1,"model":"a\"b` + canary + `"}`,
		"model with newline":     `{"version":1,"model":"a\nb"}`,
		"model starting dash":    `{"version":1,"model":"-c"}`,
		"model too long":         `{"version":1,"model":"` + strings.Repeat("m", 129) + `"}`,
		"effort unknown":         `{"version":1,"reasoning_effort":"` + canary + `"}`,
		"provider null":          `{"version":1,"provider":null}`,
		"provider unknown key":   prov(ok + `,"base_url":"https://a/v1","http_headers":{"X":"` + canary + `"}`),
		"provider no name":       prov(`"base_url":"https://a/v1","wire_api":"responses"`),
		"provider bad name":      prov(`"name":"a]b","base_url":"https://a/v1","wire_api":"responses"`),
		"provider no url":        prov(ok),
		"provider chat wire":     prov(`"name":"g","base_url":"https://a/v1","wire_api":"chat"`),
		"provider no wire":       prov(`"name":"g","base_url":"https://a/v1"`),
		"http remote":            prov(ok + `,"base_url":"http://llm.example.com/v1"`),
		"userinfo":               prov(ok + `,"base_url":"https://user:` + canary + `@a/v1"`),
		"query":                  prov(ok + `,"base_url":"https://a/v1?key=` + canary + `"`),
		"fragment":               prov(ok + `,"base_url":"https://a/v1#` + canary + `"`),
		"relative":               prov(ok + `,"base_url":"/v1"`),
		"ftp":                    prov(ok + `,"base_url":"ftp://a/v1"`),
		"space in url":           prov(ok + `,"base_url":"https://a/v 1"`),
		"port out of range":      prov(ok + `,"base_url":"https://a:99999/v1"`),
		"port zero":              prov(ok + `,"base_url":"https://a:0/v1"`),
		"port empty":             prov(ok + `,"base_url":"https://a:/v1"`),
		"quote in url":           prov(ok + `,"base_url":"https://a/v1\"x"`),
		"env key bad":            prov(ok + `,"base_url":"https://a/v1","env_key":"1KEY"`),
		"env key PATH":           prov(ok + `,"base_url":"https://a/v1","env_key":"PATH"`),
		"env key CODEX_HOME":     prov(ok + `,"base_url":"https://a/v1","env_key":"CODEX_HOME"`),
		"env key value not name": prov(ok + `,"base_url":"https://a/v1","env_key":"sk-` + canary + `"`),
		"trailing data":          `{"version":1}{}`,
		"array":                  `[]`,
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
	if p, err := LoadProfile(good); err != nil || p.Provider == nil || p.Provider.EnvKey != "CORP_LLM_KEY" {
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
		got := ConfigTOML(p)
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
		if pr := p.Provider; pr != nil && (agent.CheckBaseURL(pr.BaseURL) != "" || !agent.ValidName(pr.Name) || pr.WireAPI != "responses") {
			t.Fatalf("provider %+v accepted", pr)
		}
		// model and effort each add exactly one line; nothing a value
		// holds can start another.
		want := bytes.Count(ConfigTOML(Profile{Provider: p.Provider}), []byte("\n"))
		if p.Model != "" {
			want++
		}
		if p.ReasoningEffort != "" {
			want++
		}
		if got := bytes.Count(ConfigTOML(p), []byte("\n")); got != want {
			t.Fatalf("configuration has %d lines, want %d", got, want)
		}
	})
}

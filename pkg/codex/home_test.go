package codex

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// homeRecord is what the fake found in CODEX_HOME (FAKE_CODEX_HOME_FILE).
type homeRecord struct {
	CodexHome string            `json:"codex_home"`
	Mode      string            `json:"mode"`
	Entries   map[string]string `json:"entries"`
	Config    *string           `json:"config"`
}

func (f *fixture) home() homeRecord {
	f.t.Helper()
	var r homeRecord
	if err := json.Unmarshal([]byte(f.file("home.json")), &r); err != nil {
		f.t.Fatal(err)
	}
	return r
}

// treeDigest covers every path, mode, size and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel + "\x00" + fi.Mode().String() + "\x00" + fi.ModTime().String() + "\x00"))
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(h.Sum(nil))
}

func homeFixture(t *testing.T, env ...string) *fixture {
	f := newFixture(t, both, env...)
	f.cfg.Env = append(f.cfg.Env, "FAKE_CODEX_HOME_FILE="+filepath.Join(f.files, "home.json"))
	return f
}

// TestRunGivesCodexAPrivateHome: the private CODEX_HOME holds only the
// generated configuration, read-only, whose provider is the gateway's
// path for the profile's provider and whose only key is the credential;
// ambient OpenAI and Codex variables do not reach Codex.
func TestRunGivesCodexAPrivateHome(t *testing.T) {
	f := homeFixture(t, "OPENAI_API_KEY=sk-ambient-canary", "OPENAI_BASE_URL=https://elsewhere.example", "CODEX_API_KEY=sk-ambient-canary")
	f.cfg.Profile = Profile{Model: "gpt-5.5", ReasoningEffort: "low", Provider: "corp-openai"}
	if _, err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.home()
	if !strings.HasPrefix(r.CodexHome, f.cfg.TempDir+"/forge-codex-") || filepath.Base(r.CodexHome) != HomeDir || r.Mode != "0700" {
		t.Fatalf("CODEX_HOME %q mode %s is not the private run home", r.CodexHome, r.Mode)
	}
	if len(r.Entries) != 1 || r.Entries[ConfigFile] != "0400" {
		t.Fatalf("home seeded with %v, want only config.toml, read-only", r.Entries)
	}
	if r.Config == nil || *r.Config != string(ConfigTOML(f.cfg.Profile, testGateway)) ||
		!strings.Contains(*r.Config, `base_url = "`+agenttest.GatewayURL+`/corp-openai"`) || !strings.Contains(*r.Config, `env_key = "FORGE_GATEWAY_TOKEN"`) {
		t.Fatalf("config is not the profile's through the gateway:\n%v", r.Config)
	}
	f.requireNoRunDir() // with the read-only tmp/arg0 the fake left in the home
	names := f.file("env.txt")
	if !strings.Contains(names, "\nFORGE_GATEWAY_TOKEN\n") {
		t.Fatal("the credential's variable did not reach Codex")
	}
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY", "CODEX_BIN", "FORGE_GATEWAY_URL", "FORGE_GATEWAY_PROVIDERS"} {
		if strings.Contains(names, "\n"+k+"\n") {
			t.Errorf("%s reached Codex", k)
		}
	}
}

func TestRunTakesTheOnlyProviderOfItsKind(t *testing.T) {
	f := homeFixture(t)
	if _, err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := f.home(); !strings.Contains(*r.Config, `base_url = "`+agenttest.GatewayURL+`/corp-openai"`) {
		t.Fatalf("config:\n%s", *r.Config)
	}
}

func TestConcurrentRunsShareNoHome(t *testing.T) {
	parent := t.TempDir() // both plugins' working directories on one machine
	var wg sync.WaitGroup
	runs := make([]*fixture, 2)
	for i := range runs {
		runs[i] = homeFixture(t)
		runs[i].cfg.TempDir = parent
		wg.Add(1)
		go func(f *fixture) {
			defer wg.Done()
			if _, err := f.run(context.Background()); err != nil {
				t.Error(err)
			}
		}(runs[i])
	}
	wg.Wait()
	a, b := runs[0].home(), runs[1].home()
	if a.CodexHome == b.CodexHome {
		t.Fatalf("homes %q and %q", a.CodexHome, b.CodexHome)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("%d run directories left behind", len(entries))
	}
}

func TestRunHomeSetupFailures(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider string
		env      []string
		reason   agent.Reason
	}{
		{"an operator CODEX_HOME", "", []string{"CODEX_HOME=/srv/forge/codex"}, ReasonOperatorHome},
		{"no gateway", "", []string{plugin.EnvGatewayToken + "="}, agent.ReasonNoGateway},
		{"provider of another kind", "corp-anthropic", nil, agent.ReasonGatewayProvider},
		{"several providers of the kind", "", []string{plugin.EnvGatewayProviders + "=a=openai-responses,b=openai-responses"}, agent.ReasonGatewayChoice},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := homeFixture(t, c.env...)
			f.cfg.Profile.Provider = c.provider
			_, err := f.run(context.Background())
			agenttest.RequireReason(t, err, c.reason, plugin.CategoryIncompatible, agenttest.Credential)
			if _, err := os.Stat(filepath.Join(f.files, "argv.json")); err == nil {
				t.Fatal("Codex started")
			}
			f.requireNoRunDir()
		})
	}
}

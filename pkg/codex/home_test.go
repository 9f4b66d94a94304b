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
	Auth      *string           `json:"auth"`
}

func (f *fixture) home() homeRecord {
	f.t.Helper()
	var r homeRecord
	if err := json.Unmarshal([]byte(f.file("home.json")), &r); err != nil {
		f.t.Fatal(err)
	}
	return r
}

// operatorDir is an operator's Codex directory with an authentication
// file and the state and configuration a run must never see or change.
func operatorDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		AuthFile:          `{"OPENAI_API_KEY":"sk-operator-canary"}`,
		ConfigFile:        "model = \"operator-model\"\n[mcp_servers.x]\ncommand = \"/bin/false\"\n",
		"installation_id": "operator-installation\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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

func TestRunGivesCodexAPrivateHome(t *testing.T) {
	op := operatorDir(t)
	before := treeDigest(t, op)
	f := homeFixture(t, "CODEX_HOME="+op, "LLM_KEY=sk-provider-canary")
	f.cfg.AuthSource = op
	f.cfg.Profile = Profile{Model: "gpt-5.5", ReasoningEffort: "low",
		Provider: &Provider{Name: "gw", BaseURL: "https://llm.example.com/v1", WireAPI: "responses", EnvKey: "LLM_KEY"}}
	if _, err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.home()
	if !strings.HasPrefix(r.CodexHome, f.cfg.TempDir+"/forge-codex-") || filepath.Base(r.CodexHome) != HomeDir || r.Mode != "0700" {
		t.Fatalf("CODEX_HOME %q mode %s is not the private run home", r.CodexHome, r.Mode)
	}
	if len(r.Entries) != 2 || r.Entries[ConfigFile] != "0400" || r.Entries[AuthFile] != "0400" {
		t.Fatalf("home seeded with %v, want only config.toml and auth.json, read-only", r.Entries)
	}
	if r.Auth == nil || *r.Auth != `{"OPENAI_API_KEY":"sk-operator-canary"}` {
		t.Fatal("auth.json is not a copy of the operator's")
	}
	if r.Config == nil || *r.Config != string(ConfigTOML(f.cfg.Profile)) || strings.Contains(*r.Config, "operator-model") {
		t.Fatalf("config is not the profile's:\n%v", r.Config)
	}
	if treeDigest(t, op) != before {
		t.Fatal("the operator's directory changed")
	}
	f.requireNoRunDir() // with the read-only tmp/arg0 the fake left in the home
	if names := f.file("env.txt"); !strings.Contains(names, "\nLLM_KEY\n") {
		t.Fatal("the provider key variable did not reach Codex")
	}
}

func TestRunWithoutAuthSourceSeedsOnlyTheConfig(t *testing.T) {
	f := homeFixture(t)
	if _, err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.home()
	if len(r.Entries) != 1 || r.Entries[ConfigFile] != "0400" || *r.Config != string(ConfigTOML(Profile{})) {
		t.Fatalf("home %v", r.Entries)
	}
	// An operator directory without auth.json is fine too.
	g := homeFixture(t)
	g.cfg.AuthSource = t.TempDir()
	if _, err := g.run(context.Background()); err != nil || len(g.home().Entries) != 1 {
		t.Fatalf("%v, %v", err, g.home().Entries)
	}
}

func TestConcurrentRunsShareNoHome(t *testing.T) {
	op := operatorDir(t)
	before := treeDigest(t, op)
	parent := t.TempDir() // both plugins' working directories on one machine
	var wg sync.WaitGroup
	runs := make([]*fixture, 2)
	for i := range runs {
		runs[i] = homeFixture(t, "CODEX_HOME="+op)
		runs[i].cfg.AuthSource = op
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
	if a.CodexHome == b.CodexHome || a.CodexHome == op || b.CodexHome == op {
		t.Fatalf("homes %q and %q (operator %q)", a.CodexHome, b.CodexHome, op)
	}
	if treeDigest(t, op) != before {
		t.Fatal("the operator's directory changed")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("%d run directories left behind", len(entries))
	}
}

func TestRunHomeSetupFailures(t *testing.T) {
	t.Run("provider key unset", func(t *testing.T) {
		f := homeFixture(t)
		f.cfg.Profile.Provider = &Provider{Name: "gw", BaseURL: "https://a/v1", WireAPI: "responses", EnvKey: "LLM_KEY"}
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, agent.ReasonProviderKey, plugin.CategoryIncompatible, "panicked")
	})
	t.Run("auth.json is a directory", func(t *testing.T) {
		f := homeFixture(t)
		f.cfg.AuthSource = t.TempDir()
		os.Mkdir(filepath.Join(f.cfg.AuthSource, AuthFile), 0o700)
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, ReasonAuth, plugin.CategoryIncompatible, "panicked")
		f.requireNoRunDir()
	})
	t.Run("auth source relative", func(t *testing.T) {
		f := homeFixture(t)
		f.cfg.AuthSource = "codex-home"
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, ReasonAuth, plugin.CategoryIncompatible, "panicked")
	})
	t.Run("auth.json too large", func(t *testing.T) {
		f := homeFixture(t)
		f.cfg.AuthSource = t.TempDir()
		os.WriteFile(filepath.Join(f.cfg.AuthSource, AuthFile), make([]byte, MaxAuthBytes+1), 0o600)
		_, err := f.run(context.Background())
		agenttest.RequireReason(t, err, ReasonAuth, plugin.CategoryIncompatible, "panicked")
	})
}

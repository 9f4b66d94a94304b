package worker

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/source"
)

// baseConfig returns a valid worker.json as a generic map so cases can
// mutate one field.
func baseConfig() map[string]any {
	return map[string]any{
		"version":            1,
		"gate_url":           "ws://127.0.0.1:18080",
		"id":                 "worker-1",
		"token_env":          "FORGE_WORKER_TOKEN",
		"heartbeat_interval": "10s",
		"concurrency":        2,
		"repository_roots":   []any{"/srv/forge/repos"},
		"worktree_root":      "/srv/forge/worktrees",
		"runtime_root":       "/srv/forge/runtime",
		"repositories":       []any{map[string]any{"id": "agent-forge", "path": "/srv/forge/repos/agent-forge"}},
		"plugins": []any{
			map[string]any{"id": "codex", "argv": []any{"/srv/forge/bin/forge-codex-plugin"}},
			map[string]any{"id": "reference", "argv": []any{"/srv/forge/bin/forge-ref-plugin"}},
		},
		"environment_allowlist":       []any{"PATH", "CODEX_HOME", "CODEX_BIN"},
		"check_environment_allowlist": []any{"PATH"},
		"ceilings": map[string]any{
			"plugin_timeout": "15m", "check_timeout": "10m", "git_timeout": "1m", "cleanup_timeout": "10s",
			"plugin_output_bytes": 1048576, "check_output_bytes": 2048, "git_output_bytes": 1048576,
		},
	}
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// specExample is the spec's worker.json, byte for byte.
const specExample = `{"version":1,"gate_url":"ws://127.0.0.1:18080","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"10s","concurrency":2,"repository_roots":["/srv/forge/repos"],"worktree_root":"/srv/forge/worktrees","runtime_root":"/srv/forge/runtime","repositories":[{"id":"agent-forge","path":"/srv/forge/repos/agent-forge"}],"plugins":[{"id":"codex","argv":["/srv/forge/bin/forge-codex-plugin"]},{"id":"reference","argv":["/srv/forge/bin/forge-ref-plugin"]}],"environment_allowlist":["PATH","CODEX_HOME","CODEX_BIN"],"check_environment_allowlist":["PATH"],"ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}`

func TestParseConfigSpecExample(t *testing.T) {
	c, err := ParseConfig([]byte(specExample))
	if err != nil {
		t.Fatalf("spec example rejected: %v", err)
	}
	if c.GateURL.String() != "ws://127.0.0.1:18080" || c.ID != "worker-1" || c.Concurrency != 2 ||
		c.HeartbeatInterval != 10*time.Second || len(c.Plugins) != 2 || c.Plugins[1].ID != "reference" ||
		c.Ceilings.PluginTimeout != 15*time.Minute || c.Ceilings.CheckOutputBytes != 2048 ||
		len(c.Repositories) != 1 || c.Repositories[0].Path != "/srv/forge/repos/agent-forge" {
		t.Fatalf("parsed config differs from the file: %+v", c)
	}
}

// A Gate registration ("source":"gate") needs no path and no repository
// root.
func TestParseConfigGateSource(t *testing.T) {
	doc := strings.Replace(specExample, `"repository_roots":["/srv/forge/repos"],`, "", 1)
	doc = strings.Replace(doc, `{"id":"agent-forge","path":"/srv/forge/repos/agent-forge"}`, `{"id":"agent-forge","source":"gate"}`, 1)
	c, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatalf("gate registration rejected: %v", err)
	}
	if len(c.Repositories) != 1 || c.Repositories[0] != (Repository{ID: "agent-forge", Gate: true}) || len(c.RepositoryRoots) != 0 {
		t.Fatalf("parsed %+v", c.Repositories)
	}
}

func TestParseConfigRejects(t *testing.T) {
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }
	ceil := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["ceilings"].(map[string]any)[k] = v }
	}
	plugin := func(i int, k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["plugins"].([]any)[i].(map[string]any)[k] = v }
	}
	cases := []struct {
		name  string
		edit  func(map[string]any)
		field string
	}{
		{"version missing", del("version"), "version"},
		{"version 2", set("version", 2), "version"},
		{"unknown field", set("extra", 1), ""},
		{"gate_url missing", del("gate_url"), "gate_url"},
		{"gate_url http", set("gate_url", "http://127.0.0.1:1"), "gate_url"},
		{"gate_url userinfo", set("gate_url", "ws://u:p@127.0.0.1:1"), "gate_url"},
		{"gate_url path", set("gate_url", "ws://127.0.0.1:1/x"), "gate_url"},
		{"gate_url query", set("gate_url", "ws://127.0.0.1:1?a=b"), "gate_url"},
		{"gate_url fragment", set("gate_url", "ws://127.0.0.1:1#f"), "gate_url"},
		{"gate_url no host", set("gate_url", "ws://"), "gate_url"},
		{"id missing", del("id"), "id"},
		{"id uppercase", set("id", "Worker"), "id"},
		{"id with hash", set("id", "w#1"), "id"},
		{"id with slash", set("id", "a/b"), "id"},
		{"id too long", set("id", strings.Repeat("a", 65)), "id"},
		{"token_env missing", del("token_env"), "token_env"},
		{"token_env bad", set("token_env", "1TOKEN"), "token_env"},
		{"token_env equals", set("token_env", "A=B"), "token_env"},
		{"heartbeat missing", del("heartbeat_interval"), "heartbeat_interval"},
		{"heartbeat garbage", set("heartbeat_interval", "soon"), "heartbeat_interval"},
		{"heartbeat zero", set("heartbeat_interval", "0s"), "heartbeat_interval"},
		{"heartbeat negative", set("heartbeat_interval", "-1s"), "heartbeat_interval"},
		{"heartbeat huge", set("heartbeat_interval", "2h"), "heartbeat_interval"},
		{"heartbeat number", set("heartbeat_interval", 10), "heartbeat_interval"},
		{"concurrency zero", set("concurrency", 0), "concurrency"},
		{"concurrency huge", set("concurrency", 257), "concurrency"},
		{"concurrency float", set("concurrency", 1.5), "concurrency"},
		{"concurrency string", set("concurrency", "2"), "concurrency"},
		{"root relative", set("repository_roots", []any{"srv/repos"}), "repository_roots[0]"},
		{"root dotdot", set("repository_roots", []any{"/srv/../repos"}), "repository_roots[0]"},
		{"root trailing slash", set("repository_roots", []any{"/srv/forge/repos/"}), "repository_roots[0]"},
		{"root is slash", set("repository_roots", []any{"/"}), "repository_roots[0]"},
		{"root duplicate", set("repository_roots", []any{"/srv/forge/repos", "/srv/forge/repos"}), "repository_roots[1]"},
		{"root nested", set("repository_roots", []any{"/srv/forge/repos", "/srv/forge/repos/x"}), "repository_roots[1]"},
		{"worktree missing", del("worktree_root"), "worktree_root"},
		{"worktree relative", set("worktree_root", "wt"), "worktree_root"},
		{"worktree inside root", set("worktree_root", "/srv/forge/repos/wt"), "worktree_root"},
		{"runtime missing", del("runtime_root"), "runtime_root"},
		{"runtime double slash", set("runtime_root", "/srv//runtime"), "runtime_root"},
		{"runtime equals worktree", set("runtime_root", "/srv/forge/worktrees"), "runtime_root"},
		{"repo outside roots", set("repositories", []any{map[string]any{"id": "a", "path": "/elsewhere/a"}}), "repositories[0].path"},
		{"repo is root", set("repositories", []any{map[string]any{"id": "a", "path": "/srv/forge/repos"}}), "repositories[0].path"},
		{"repo prefix trick", set("repositories", []any{map[string]any{"id": "a", "path": "/srv/forge/reposx/a"}}), "repositories[0].path"},
		{"repo bad id", set("repositories", []any{map[string]any{"id": "../a", "path": "/srv/forge/repos/a"}}), "repositories[0].id"},
		{"repo duplicate id", set("repositories", []any{
			map[string]any{"id": "a", "path": "/srv/forge/repos/a"},
			map[string]any{"id": "a", "path": "/srv/forge/repos/b"},
		}), "repositories[1].id"},
		{"repo duplicate path", set("repositories", []any{
			map[string]any{"id": "a", "path": "/srv/forge/repos/a"},
			map[string]any{"id": "b", "path": "/srv/forge/repos/a"},
		}), "repositories[1].path"},
		{"repo unknown field", set("repositories", []any{map[string]any{"id": "a", "path": "/srv/forge/repos/a", "url": "x"}}), "repositories[0]"},
		{"repo source unknown", set("repositories", []any{map[string]any{"id": "a", "source": "github"}}), "repositories[0].source"},
		{"repo source with path", set("repositories", []any{map[string]any{"id": "a", "source": "gate", "path": "/srv/forge/repos/a"}}), "repositories[0].path"},
		{"repo source duplicate id", set("repositories", []any{
			map[string]any{"id": "a", "path": "/srv/forge/repos/a"},
			map[string]any{"id": "a", "source": "gate"},
		}), "repositories[1].id"},
		{"plugins missing", del("plugins"), "plugins"},
		{"plugins empty", set("plugins", []any{}), "plugins"},
		{"plugin bad id", plugin(0, "id", "Codex"), "plugins[0].id"},
		{"plugin duplicate id", plugin(1, "id", "codex"), "plugins[1].id"},
		{"plugin argv empty", plugin(0, "argv", []any{}), "plugins[0].argv"},
		{"plugin argv relative", plugin(0, "argv", []any{"bin/plugin"}), "plugins[0].argv[0]"},
		{"plugin argv empty element", plugin(0, "argv", []any{"/bin/x", ""}), "plugins[0].argv[1]"},
		{"plugin argv NUL", plugin(0, "argv", []any{"/bin/x", "a\x00b"}), "plugins[0].argv[1]"},
		{"plugin sha256 upper", plugin(0, "sha256", strings.Repeat("A", 64)), "plugins[0].sha256"},
		{"plugin sha256 short", plugin(0, "sha256", strings.Repeat("a", 63)), "plugins[0].sha256"},
		{"plugin unknown field", plugin(0, "digest", "x"), "plugins[0]"},
		{"allowlist bad name", set("environment_allowlist", []any{"PATH", "A-B"}), "environment_allowlist[1]"},
		{"allowlist duplicate", set("environment_allowlist", []any{"PATH", "PATH"}), "environment_allowlist[1]"},
		{"check allowlist not subset", set("check_environment_allowlist", []any{"HOME"}), "check_environment_allowlist[0]"},
		{"check allowlist null", set("check_environment_allowlist", nil), "check_environment_allowlist"},
		{"ceilings missing", del("ceilings"), "ceilings"},
		{"ceiling timeout missing", func(m map[string]any) { delete(m["ceilings"].(map[string]any), "plugin_timeout") }, "ceilings.plugin_timeout"},
		{"ceiling timeout zero", ceil("check_timeout", "0s"), "ceilings.check_timeout"},
		{"ceiling timeout huge", ceil("git_timeout", "25h"), "ceilings.git_timeout"},
		{"ceiling bytes zero", ceil("plugin_output_bytes", 0), "ceilings.plugin_output_bytes"},
		{"ceiling bytes negative", ceil("check_output_bytes", -1), "ceilings.check_output_bytes"},
		{"ceiling bytes huge", ceil("git_output_bytes", 1<<31), "ceilings.git_output_bytes"},
		{"ceiling unknown", ceil("memory", 1), "ceilings"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := baseConfig()
			tc.edit(m)
			c, err := ParseConfig(mustJSON(t, m))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError", err)
			}
			if ce.Field != tc.field {
				t.Fatalf("error names field %q, want %q (%v)", ce.Field, tc.field, err)
			}
			if c != nil {
				t.Fatal("config returned with an error")
			}
		})
	}
}

func TestParseConfigRejectsRawShapes(t *testing.T) {
	cases := map[string]string{
		"duplicate key":   strings.Replace(specExample, `"id":"worker-1",`, `"id":"worker-1","id":"worker-2",`, 1),
		"case variant":    strings.Replace(specExample, `"concurrency"`, `"Concurrency"`, 1),
		"trailing data":   specExample + `{}`,
		"not an object":   `[1]`,
		"empty":           ``,
		"invalid utf8":    strings.Replace(specExample, `worker-1`, "worker-\xff", 1),
		"too large":       specExample + strings.Repeat(" ", MaxConfigBytes),
		"null value":      strings.Replace(specExample, `"concurrency":2`, `"concurrency":null`, 1),
		"secret in value": strings.Replace(specExample, `"token_env":"FORGE_WORKER_TOKEN"`, `"token_env":"s3cr3t-token!"`, 1),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(doc))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, leak := range []string{"s3cr3t", "/srv", "worker-", "\xff"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error leaks a value: %v", err)
				}
			}
		})
	}
}

// hostFixture lays out a real directory tree and returns a valid config for it.
func hostFixture(t *testing.T) (*Config, string) {
	t.Helper()
	dir := t.TempDir()
	roots := filepath.Join(dir, "repos")
	if err := os.MkdirAll(filepath.Join(roots, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	plug := filepath.Join(dir, "plugin")
	if err := os.WriteFile(plug, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := baseConfig()
	m["repository_roots"] = []any{roots}
	m["repositories"] = []any{map[string]any{"id": "a", "path": filepath.Join(roots, "a")}}
	m["worktree_root"] = filepath.Join(dir, "wt")
	m["runtime_root"] = filepath.Join(dir, "rt")
	m["plugins"] = []any{map[string]any{"id": "reference", "argv": []any{plug}}}
	// The pipeline's unit tests run their plugins unconfined (their
	// fixtures live in the test's temporary directories); sandbox_test.go
	// and the e2e scripts run them in the sandbox.
	m["sandbox"] = "none"
	c, err := ParseConfig(mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

func envWith(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestCheckHost(t *testing.T) {
	goodEnv := envWith(map[string]string{"FORGE_WORKER_TOKEN": "zq-secret-9-0123456789"})
	t.Run("valid", func(t *testing.T) {
		c, dir := hostFixture(t)
		tok, err := CheckHost(c, goodEnv)
		if err != nil || tok != "zq-secret-9-0123456789" {
			t.Fatalf("CheckHost = %q, %v", tok, err)
		}
		for _, d := range []string{"wt", "rt"} {
			fi, err := os.Stat(filepath.Join(dir, d))
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Fatalf("%s not created private: %v %v", d, fi, err)
			}
		}
	})
	cases := []struct {
		name  string
		env   func(string) string
		edit  func(t *testing.T, c *Config, dir string)
		field string
	}{
		{"token unset", envWith(nil), nil, "token_env"},
		{"token empty", envWith(map[string]string{"FORGE_WORKER_TOKEN": ""}), nil, "token_env"},
		{"token with space", envWith(map[string]string{"FORGE_WORKER_TOKEN": "zq secret-0123456789"}), nil, "token_env"},
		{"token with newline", envWith(map[string]string{"FORGE_WORKER_TOKEN": "zq\nsecret-0123456789"}), nil, "token_env"},
		{"token of 15 bytes", envWith(map[string]string{"FORGE_WORKER_TOKEN": "zq-secret-9-012"}), nil, "token_env"},
		{"plugin missing", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.Plugins[0].Argv[0] = filepath.Join(dir, "nope")
		}, "plugins[0].argv[0]"},
		{"plugin not executable", goodEnv, func(t *testing.T, c *Config, dir string) {
			if err := os.Chmod(c.Plugins[0].Argv[0], 0o644); err != nil {
				t.Fatal(err)
			}
		}, "plugins[0].argv[0]"},
		{"plugin is a directory", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.Plugins[0].Argv[0] = filepath.Join(dir, "repos")
		}, "plugins[0].argv[0]"},
		{"plugin digest mismatch", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.Plugins[0].SHA256 = strings.Repeat("0", 64)
		}, "plugins[0].sha256"},
		{"repository missing", goodEnv, func(t *testing.T, c *Config, dir string) {
			if err := os.Remove(c.Repositories[0].Path); err != nil {
				t.Fatal(err)
			}
		}, "repositories[0].path"},
		{"repository symlink", goodEnv, func(t *testing.T, c *Config, dir string) {
			p := c.Repositories[0].Path
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(dir, p); err != nil {
				t.Fatal(err)
			}
		}, "repositories[0].path"},
		{"root missing", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.RepositoryRoots[0] = filepath.Join(dir, "gone")
		}, "repository_roots[0]"},
		{"prepared repository's parent missing", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.Repositories[0].Path = filepath.Join(dir, "repos", "public", source.DirName("https://github.com/o/r.git"))
		}, "repositories[0].path"},
		{"missing repository merely ending in .git", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.Repositories[0].Path = filepath.Join(dir, "repos", "r.git")
		}, "repositories[0].path"},
		{"runtime two levels missing", goodEnv, func(t *testing.T, c *Config, dir string) {
			c.RuntimeRoot = filepath.Join(dir, "x", "y")
		}, "runtime_root"},
		{"worktree is a file", goodEnv, func(t *testing.T, c *Config, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "wt"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "worktree_root"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := hostFixture(t)
			if tc.edit != nil {
				tc.edit(t, c, dir)
			}
			tok, err := CheckHost(c, tc.env)
			var ce *ConfigError
			if err == nil || !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("CheckHost = %q, %v; want error naming %s", tok, err, tc.field)
			}
			if strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), "zq") {
				t.Fatalf("error leaks a path or token: %v", err)
			}
		})
	}
	// A Gate registration names no path: its cache lives under
	// runtime_root, so nothing of it is checked on the host.
	t.Run("gate registration", func(t *testing.T) {
		c, _ := hostFixture(t)
		c.Repositories[0] = Repository{ID: c.Repositories[0].ID, Gate: true}
		if _, err := CheckHost(c, goodEnv); err != nil {
			t.Fatalf("gate registration refused: %v", err)
		}
	})
	t.Run("digest match", func(t *testing.T) {
		c, _ := hostFixture(t)
		sum, err := fileSHA256(c.Plugins[0].Argv[0])
		if err != nil {
			t.Fatal(err)
		}
		c.Plugins[0].SHA256 = sum
		if _, err := CheckHost(c, goodEnv); err != nil {
			t.Fatalf("pinned digest rejected: %v", err)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(specExample))
	seeds, _ := filepath.Glob("testdata/config/*.json")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError", err)
			}
			return
		}
		if c.Concurrency < 1 || c.Concurrency > MaxConcurrency || len(c.Plugins) == 0 || c.GateURL == nil {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
	})
}

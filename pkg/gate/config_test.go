package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

const (
	testOwnerToken  = "owner-token-value-0001"
	testWorkerToken = "worker-token-value-0001"
)

func exampleConfig(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/gate.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func testEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func defaultEnv() map[string]string {
	return map[string]string{"FORGE_OWNER_TOKEN": testOwnerToken, "FORGE_WORKER_TOKEN": testWorkerToken}
}

// edit decodes the example config into a generic map, applies f and
// re-encodes it.
func edit(tb testing.TB, f func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(exampleConfig(tb), &m); err != nil {
		tb.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func worker0(m map[string]any) map[string]any {
	return m["workers"].([]any)[0].(map[string]any)
}

func repo0(m map[string]any) map[string]any {
	return m["repositories"].([]any)[0].(map[string]any)
}

func TestLoadExampleConfig(t *testing.T) {
	c, s, err := LoadConfig(bytes.NewReader(exampleConfig(t)), testEnv(defaultEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers[0].Concurrency != 2 || c.Repositories[0].Execution.PluginID != "codex" || c.Lifecycle.MaxAttempts != 3 {
		t.Fatalf("decoded %+v", c)
	}
	if len(s.workers) != 1 {
		t.Fatal("worker secrets")
	}
}

func TestConfigReplication(t *testing.T) {
	for _, mode := range []string{"off", "async", "sync"} {
		b := edit(t, func(m map[string]any) {
			m["replication"] = mode
			if mode != "off" {
				m["replication_socket"] = "/run/agent-forge/litestream.sock"
			}
		})
		c, _, err := LoadConfig(bytes.NewReader(b), testEnv(map[string]string{"FORGE_OWNER_TOKEN": strings.Repeat("o", 32), "FORGE_WORKER_TOKEN": strings.Repeat("w", 32)}))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if r := c.replication(); r.Mode != mode || (mode != "off") != (r.Socket != "") {
			t.Fatalf("%s: %+v", mode, r)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	secondWorker := func(m map[string]any) {
		m["workers"] = append(m["workers"].([]any), map[string]any{"id": "worker-2", "pool": "coding", "token_env": "W2", "concurrency": 1})
	}
	cases := []struct {
		name  string
		data  []byte
		env   map[string]string
		field string
	}{
		{"unknown field", edit(t, func(m map[string]any) { m["public_repository_dir"] = "/x" }), nil, ""},
		{"delivery", edit(t, func(m map[string]any) { m["delivery"] = map[string]any{} }), nil, ""},
		{"repository_url without a root", edit(t, func(m map[string]any) { repo0(m)["repository_url"] = "https://github.com/a/b.git" }), nil, "public_repository_root"},
		{"duplicate field", []byte(strings.Replace(string(exampleConfig(t)), `"version":1,`, `"version":1,"version":1,`, 1)), nil, "version"},
		{"trailing data", append(exampleConfig(t), []byte("{}")...), nil, ""},
		{"version", edit(t, func(m map[string]any) { m["version"] = 2 }), nil, "version"},
		{"listen", edit(t, func(m map[string]any) { m["listen"] = "localhost" }), nil, "listen"},
		{"listen port", edit(t, func(m map[string]any) { m["listen"] = "127.0.0.1:99999" }), nil, "listen"},
		{"database", edit(t, func(m map[string]any) { delete(m, "database") }), nil, "database"},
		{"owner env name", edit(t, func(m map[string]any) { m["owner_token_env"] = "BAD-NAME" }), nil, "owner_token_env"},
		{"recovery 0", edit(t, func(m map[string]any) { m["recovery_interval"] = "0s" }), nil, "recovery_interval"},
		{"poll syntax", edit(t, func(m map[string]any) { m["lease_poll_interval"] = "soon" }), nil, "lease_poll_interval"},
		{"floor too small", edit(t, func(m map[string]any) { m["free_space_floor_bytes"] = 4096 }), nil, "free_space_floor_bytes"},
		{"floor negative", edit(t, func(m map[string]any) { m["free_space_floor_bytes"] = -1 }), nil, "free_space_floor_bytes"},
		{"floor too large", edit(t, func(m map[string]any) { m["free_space_floor_bytes"] = int64(1) << 51 }), nil, "free_space_floor_bytes"},
		{"replication mode", edit(t, func(m map[string]any) { m["replication"] = "eventually" }), nil, "replication"},
		{"replication without socket", edit(t, func(m map[string]any) { m["replication"] = "sync" }), nil, "replication_socket"},
		{"replication socket relative", edit(t, func(m map[string]any) {
			m["replication"], m["replication_socket"] = "async", "run/litestream.sock"
		}), nil, "replication_socket"},
		{"replication socket unclean", edit(t, func(m map[string]any) {
			m["replication"], m["replication_socket"] = "sync", "/run/../run/litestream.sock"
		}), nil, "replication_socket"},
		{"replication socket without replication", edit(t, func(m map[string]any) { m["replication_socket"] = "/run/litestream.sock" }), nil, "replication_socket"},
		{"replication of memory", edit(t, func(m map[string]any) {
			m["database"], m["replication"], m["replication_socket"] = ":memory:", "sync", "/run/litestream.sock"
		}), nil, "replication"},
		{"repo timeout syntax", edit(t, func(m map[string]any) { repo0(m)["execution"].(map[string]any)["git_timeout"] = "1 minute" }), nil, "repositories[0].execution.git_timeout"},
		{"wrong type", edit(t, func(m map[string]any) { worker0(m)["concurrency"] = "2" }), nil, "workers[0].concurrency"},
		{"default pool", edit(t, func(m map[string]any) { m["default_pool"] = "Bad Pool" }), nil, "default_pool"},
		{"default pool unserved", edit(t, func(m map[string]any) { m["default_pool"] = "gpu" }), nil, "default_pool"},
		{"lifecycle attempts", edit(t, func(m map[string]any) { m["lifecycle"].(map[string]any)["max_attempts"] = 0 }), nil, "lifecycle"},
		{"lifecycle ttl", edit(t, func(m map[string]any) { m["lifecycle"].(map[string]any)["lease_ttl"] = "-1s" }), nil, "lifecycle"},
		{"execution plugin", edit(t, func(m map[string]any) { m["default_execution"].(map[string]any)["plugin_id"] = "../x" }), nil, "default_execution"},
		{"execution bytes", edit(t, func(m map[string]any) { m["default_execution"].(map[string]any)["plugin_output_bytes"] = 0 }), nil, "default_execution"},
		{"no workers", edit(t, func(m map[string]any) { m["workers"] = []any{} }), nil, "workers"},
		{"worker id", edit(t, func(m map[string]any) { worker0(m)["id"] = "worker/1" }), nil, "workers[0].id"},
		{"worker id hash", edit(t, func(m map[string]any) { worker0(m)["id"] = "worker#1" }), nil, "workers[0].id"},
		{"dup worker", edit(t, func(m map[string]any) { m["workers"] = append(m["workers"].([]any), worker0(m)) }), nil, "workers[1].id"},
		{"concurrency 0", edit(t, func(m map[string]any) { worker0(m)["concurrency"] = 0 }), nil, "workers[0].concurrency"},
		{"concurrency big", edit(t, func(m map[string]any) { worker0(m)["concurrency"] = 1000 }), nil, "workers[0].concurrency"},
		{"worker env is owner env", edit(t, func(m map[string]any) { worker0(m)["token_env"] = "FORGE_OWNER_TOKEN" }), nil, "workers[0].token_env"},
		{"dup repo", edit(t, func(m map[string]any) { m["repositories"] = append(m["repositories"].([]any), repo0(m)) }), nil, "repositories[1].id"},
		{"branch", edit(t, func(m map[string]any) { repo0(m)["default_branch"] = "../main" }), nil, "repositories[0].default_branch"},
		{"repo pool unserved", edit(t, func(m map[string]any) { repo0(m)["worker_pool"] = "gpu" }), nil, "repositories[0].worker_pool"},
		{"repo execution", edit(t, func(m map[string]any) { repo0(m)["execution"].(map[string]any)["environment"] = []any{"PATH", "PATH"} }), nil, "repositories[0].execution"},
		{"null", edit(t, func(m map[string]any) { m["repositories"] = nil }), nil, "repositories"},
		{"budget empty", edit(t, func(m map[string]any) { repo0(m)["budget"] = map[string]any{} }), nil, "repositories[0].budget"},
		{"budget zero", edit(t, func(m map[string]any) { repo0(m)["budget"] = map[string]any{"job": map[string]any{"max_tokens": 0}} }), nil, "repositories[0].budget"},
		{"budget unknown", edit(t, func(m map[string]any) { repo0(m)["budget"] = map[string]any{"job": map[string]any{"max_dollars": 5}} }), nil, "repositories[0].budget.job"},
		{"budget null", edit(t, func(m map[string]any) { repo0(m)["budget"] = map[string]any{"attempt": nil} }), nil, "repositories[0].budget.attempt"},
		{"owner token missing", exampleConfig(t), map[string]string{"FORGE_WORKER_TOKEN": testWorkerToken}, "owner_token_env"},
		{"worker token missing", exampleConfig(t), map[string]string{"FORGE_OWNER_TOKEN": testOwnerToken}, "workers[0].token_env"},
		{"owner token spaces", exampleConfig(t), map[string]string{"FORGE_OWNER_TOKEN": "has space " + testOwnerToken, "FORGE_WORKER_TOKEN": testWorkerToken}, "owner_token_env"},
		{"owner token of 15 bytes", exampleConfig(t), map[string]string{"FORGE_OWNER_TOKEN": testOwnerToken[:15], "FORGE_WORKER_TOKEN": testWorkerToken}, "owner_token_env"},
		{"worker token of 15 bytes", exampleConfig(t), map[string]string{"FORGE_OWNER_TOKEN": testOwnerToken, "FORGE_WORKER_TOKEN": testWorkerToken[:15]}, "workers[0].token_env"},
		{"tokens collide", exampleConfig(t), map[string]string{"FORGE_OWNER_TOKEN": testOwnerToken, "FORGE_WORKER_TOKEN": testOwnerToken}, "workers[0].token_env"},
		{"worker tokens collide", edit(t, secondWorker), map[string]string{"FORGE_OWNER_TOKEN": testOwnerToken, "FORGE_WORKER_TOKEN": testWorkerToken, "W2": testWorkerToken}, "workers[1].token_env"},
		{"too large", append(exampleConfig(t), bytes.Repeat([]byte(" "), MaxConfigBytes)...), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = defaultEnv()
			}
			_, _, err := LoadConfig(bytes.NewReader(tc.data), testEnv(env))
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("not a ConfigError: %v", err)
			}
			if !strings.HasPrefix(ce.Field, tc.field) {
				t.Fatalf("error %q names field %q, want %q", err, ce.Field, tc.field)
			}
			for _, secret := range []string{testOwnerToken, testWorkerToken} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error leaks a token: %v", err)
				}
			}
			if len(err.Error()) > 200 {
				t.Fatalf("error not bounded: %d bytes", len(err.Error()))
			}
		})
	}
}

func FuzzLoadConfig(f *testing.F) {
	f.Add(exampleConfig(f))
	f.Add([]byte(`{"version":1}`))
	f.Add(edit(f, func(m map[string]any) {
		repo0(m)["budget"] = map[string]any{"attempt": map[string]any{"max_requests": 40}, "job": map[string]any{"max_tokens": 500000}}
	}))
	f.Add(edit(f, func(m map[string]any) {
		m["delivery"], m["git_executable"] = deliverySection("/nonexistent/app.pem"), "/usr/bin/git"
	}))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, s, err := LoadConfig(bytes.NewReader(data), testEnv(defaultEnv()))
		if err != nil {
			if c != nil || s != nil {
				t.Fatal("partial result with error")
			}
			if strings.Contains(err.Error(), testOwnerToken) || strings.Contains(err.Error(), testWorkerToken) {
				t.Fatal("error leaks a token")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
	})
}

// TestConfigDatabaseDSN: the database field is checked against the store's
// DSN rules at load. Non-canonical file paths (plain or file: URI) and
// unsupported DSNs stop startup naming the field and never the value;
// memory forms and canonical paths load.
func TestConfigDatabaseDSN(t *testing.T) {
	withDB := func(db string) []byte {
		return edit(t, func(m map[string]any) { m["database"] = db })
	}
	for _, db := range []string{
		":memory:", "file::memory:?cache=shared", "file:named?mode=memory", "file:?mode=memory",
		"/srv/forge/state/forge.db", "state/forge.db", "file:///srv/forge/state/forge.db?mode=rwc&cache=private",
		"file:/srv/forge/state/forge.db",
	} {
		if _, _, err := LoadConfig(bytes.NewReader(withDB(db)), testEnv(defaultEnv())); err != nil {
			t.Fatalf("%q refused: %v", db, err)
		}
	}
	for _, db := range []string{
		"/srv/forge/state/./forge.db",
		"/srv/forge/state//forge.db",
		"/srv/forge/x/../state/forge.db",
		"/srv/forge/state/forge.db/",
		"./forge.db",
		"file:///srv/forge/state/./forge.db",
		"file:///srv/forge/state//forge.db?mode=rwc",
		"file:/srv/forge/x/../state/forge.db",
		"file:///srv/forge/state/forge.db?mode=ro",
		"file://localhost/srv/forge/state/forge.db",
		":forge.db",
	} {
		_, _, err := LoadConfig(bytes.NewReader(withDB(db)), testEnv(defaultEnv()))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "database" {
			t.Fatalf("%q: got %v, want a ConfigError naming database", db, err)
		}
		if strings.Contains(err.Error(), "srv") || strings.Contains(err.Error(), "forge.db") {
			t.Fatalf("%q: error names the value: %v", db, err)
		}
	}
}

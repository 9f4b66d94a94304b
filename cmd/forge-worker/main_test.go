package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	// -config given twice is a usage error even when the last one names an
	// existing file (the context is cancelled so a wrongly accepted command
	// line cannot block; it would exit 0 or 1, not 2).
	dir := t.TempDir()
	valid := filepath.Join(dir, "worker.json")
	if err := os.WriteFile(valid, []byte(`{"version":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{}, {"-x"}, {"extra"}, {"-config", "a", "b"}, {"--version", "-config", "a"},
		{"-config", filepath.Join(dir, "nope.json"), "-config", valid}, {"-config", valid, "-config", valid},
		{"-config=" + valid, "--config", valid}, {"--version", "--version"}} {
		var out, errOut bytes.Buffer
		err := run(stopped, args, nil, &out, &errOut)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 || out.Len() != 0 {
			t.Fatalf("args %q: err %v, stdout %q", args, err, out.String())
		}
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, nil, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "forge-worker ") {
		t.Fatalf("version line %q", out.String())
	}
}

// TestStartupFailuresAreValueFree: a missing plugin executable, a missing
// token and a bad file all exit 1 without printing paths or values.
func TestStartupFailuresAreValueFree(t *testing.T) {
	dir := t.TempDir()
	secretDir := filepath.Join(dir, "private-plugin-dir")
	cfg := func(plugin string) string {
		return `{"version":1,"gate_url":"ws://127.0.0.1:1","id":"w","token_env":"FORGE_TEST_WORKER_TOKEN","heartbeat_interval":"1s","concurrency":1,` +
			`"repository_roots":[],"worktree_root":"` + dir + `/wt","runtime_root":"` + dir + `/rt","repositories":[],` +
			`"plugins":[{"id":"reference","argv":["` + plugin + `"]}],"environment_allowlist":["PATH"],` +
			`"ceilings":{"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}`
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("FORGE_TEST_WORKER_TOKEN", "tok-value-xyz")
	cases := map[string]string{
		"missing plugin": write("a.json", cfg(secretDir+"/forge-ref-plugin")),
		"bad json":       write("b.json", `{"version":1,"id":"tok-value-xyz"`),
		"missing file":   filepath.Join(dir, "nope.json"),
	}
	for name, path := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"-config", path}, nil, &out, &errOut)
			if err == nil || exitCode(err) != 1 {
				t.Fatalf("err %v", err)
			}
			for _, leak := range []string{secretDir, "tok-value-xyz", dir} {
				if strings.Contains(errOut.String(), leak) || strings.Contains(err.Error(), leak) {
					t.Fatalf("startup error leaks a value: %s", errOut.String())
				}
			}
			if errOut.Len() == 0 {
				t.Fatal("no error logged")
			}
		})
	}
	t.Run("missing token", func(t *testing.T) {
		t.Setenv("FORGE_TEST_WORKER_TOKEN", "")
		exe, _ := os.Executable()
		var errOut bytes.Buffer
		err := run(context.Background(), []string{"-config", write("c.json", cfg(exe))}, nil, &bytes.Buffer{}, &errOut)
		if err == nil || !strings.Contains(err.Error(), "token_env") {
			t.Fatalf("err %v", err)
		}
	})
}

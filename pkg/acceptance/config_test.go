package acceptance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runBinary runs one of the built binaries to completion (bounded) and
// returns its exit code, stdout and stderr.
func runBinary(t testing.TB, name string, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(name), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("%s: %v", name, err)
	return 0, "", ""
}

const gateTemplate = `{"version":1,"listen":"127.0.0.1:0","database":"DB","owner_token_env":"ACC_OWNER",` +
	`"recovery_interval":"1s","lease_poll_interval":"100ms","default_pool":"local",` +
	`"lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":3},` +
	`"default_execution":{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},` +
	`"workers":[{"id":"worker-1","pool":"local","token_env":"ACC_WORKER","concurrency":1}],"repositories":[]}`

// TestGateConfigHostility: bad configs and unsafe database paths stop the
// Gate with a nonzero exit and a message that names neither a token value
// nor the database path, and nothing is created or repaired.
func TestGateConfigHostility(t *testing.T) {
	t.Parallel()
	ownerTok := "OWNERSECRET" + randHex(t, 8)
	workerTok := "WORKERSECRET" + randHex(t, 8)
	env := []string{"PATH=" + os.Getenv("PATH"), "ACC_OWNER=" + ownerTok, "ACC_WORKER=" + workerTok}

	type setup func(t *testing.T, dir string) (cfg string, env []string)
	withDB := func(db string) string { return strings.Replace(gateTemplate, "DB", db, 1) }
	cases := map[string]setup{
		"unknown field": func(t *testing.T, dir string) (string, []string) {
			return strings.Replace(withDB(filepath.Join(dir, "state", "f.db")), `"version":1`, `"version":1,"zz":"`+ownerTok+`"`, 1), env
		},
		"duplicate field": func(t *testing.T, dir string) (string, []string) {
			return strings.Replace(withDB(filepath.Join(dir, "state", "f.db")), `"version":1`, `"version":1,"version":1`, 1), env
		},
		"trailing data": func(t *testing.T, dir string) (string, []string) {
			return withDB(filepath.Join(dir, "state", "f.db")) + "{}", env
		},
		"missing owner token": func(t *testing.T, dir string) (string, []string) {
			return withDB(filepath.Join(dir, "state", "f.db")), []string{"PATH=" + os.Getenv("PATH"), "ACC_WORKER=" + workerTok}
		},
		"colliding tokens": func(t *testing.T, dir string) (string, []string) {
			return withDB(filepath.Join(dir, "state", "f.db")), []string{"PATH=" + os.Getenv("PATH"), "ACC_OWNER=" + ownerTok, "ACC_WORKER=" + ownerTok}
		},
		"symlinked database": func(t *testing.T, dir string) (string, []string) {
			must(t, os.Mkdir(filepath.Join(dir, "state"), 0o700))
			must(t, os.WriteFile(filepath.Join(dir, "real.db"), nil, 0o600))
			must(t, os.Symlink(filepath.Join(dir, "real.db"), filepath.Join(dir, "state", "f.db")))
			return withDB(filepath.Join(dir, "state", "f.db")), env
		},
		"symlinked parent": func(t *testing.T, dir string) (string, []string) {
			must(t, os.Mkdir(filepath.Join(dir, "real"), 0o700))
			must(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "state")))
			return withDB(filepath.Join(dir, "state", "f.db")), env
		},
		"group readable parent": func(t *testing.T, dir string) (string, []string) {
			must(t, os.Mkdir(filepath.Join(dir, "state"), 0o750))
			must(t, os.Chmod(filepath.Join(dir, "state"), 0o750))
			return withDB(filepath.Join(dir, "state", "f.db")), env
		},
		"world readable database": func(t *testing.T, dir string) (string, []string) {
			must(t, os.Mkdir(filepath.Join(dir, "state"), 0o700))
			must(t, os.WriteFile(filepath.Join(dir, "state", "f.db"), nil, 0o644))
			must(t, os.Chmod(filepath.Join(dir, "state", "f.db"), 0o644))
			return withDB(filepath.Join(dir, "state", "f.db")), env
		},
		"two missing levels": func(t *testing.T, dir string) (string, []string) {
			return withDB(filepath.Join(dir, "a", "b", "f.db")), env
		},
		"bad dsn parameter": func(t *testing.T, dir string) (string, []string) {
			must(t, os.Mkdir(filepath.Join(dir, "state"), 0o700))
			return withDB("file://" + filepath.Join(dir, "state", "f.db") + "?mode=ro"), env
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg, env := setup(t, dir)
			cfgPath := filepath.Join(dir, "gate.json")
			must(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
			before := snapshot(t, dir)
			code, stdout, stderr := runBinary(t, "forge-gate", env, "", "-config", cfgPath)
			if code == 0 {
				t.Fatalf("exit 0 for a bad config; stderr %s", stderr)
			}
			if stderr == "" {
				t.Error("no message on stderr")
			}
			for _, secret := range []string{ownerTok, workerTok, dir, "f.db"} {
				if strings.Contains(stdout+stderr, secret) {
					t.Errorf("output contains %q: %s", secret, stderr)
				}
			}
			if after := snapshot(t, dir); after != before {
				t.Errorf("a failed start changed the filesystem:\n%s\n->\n%s", before, after)
			}
		})
	}
}

// snapshot lists every path under dir with its mode.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		b.WriteString(p + " " + fi.Mode().String() + "\n")
		return nil
	})
	return b.String()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorkerConfigHostility: bad Worker configs exit nonzero without token
// values in the output.
func TestWorkerConfigHostility(t *testing.T) {
	t.Parallel()
	tok := "WORKERSECRET" + randHex(t, 8)
	dir := t.TempDir()
	good := `{"version":1,"gate_url":"ws://127.0.0.1:1","id":"worker-1","token_env":"ACC_WORKER","heartbeat_interval":"1s","concurrency":1,` +
		`"repository_roots":[],"worktree_root":"` + dir + `/wt","runtime_root":"` + dir + `/rt","repositories":[],"plugins":[{"id":"reference","argv":["` + bin("forge-ref-plugin") + `"]}],"environment_allowlist":["PATH"],` +
		`"ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}`
	env := []string{"PATH=" + os.Getenv("PATH"), "ACC_WORKER=" + tok}
	cases := map[string]struct {
		cfg string
		env []string
	}{
		"unknown field":     {strings.Replace(good, `"version":1`, `"version":1,"token":"`+tok+`"`, 1), env},
		"case variant":      {strings.Replace(good, `"concurrency"`, `"Concurrency"`, 1), env},
		"trailing":          {good + " x", env},
		"missing token":     {good, []string{"PATH=" + os.Getenv("PATH")}},
		"token in url":      {strings.Replace(good, "ws://127.0.0.1:1", "ws://u:"+tok+"@127.0.0.1:1", 1), env},
		"relative plugin":   {strings.Replace(good, bin("forge-ref-plugin"), "forge-ref-plugin", 1), env},
		"zero concurrency":  {strings.Replace(good, `"concurrency":1`, `"concurrency":0`, 1), env},
		"bad heartbeat":     {strings.Replace(good, `"heartbeat_interval":"1s"`, `"heartbeat_interval":"soon"`, 1), env},
		"ceiling too large": {strings.Replace(good, `"plugin_output_bytes":1048576`, `"plugin_output_bytes":1e30`, 1), env},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "worker.json")
			must(t, os.WriteFile(p, []byte(c.cfg), 0o600))
			code, stdout, stderr := runBinary(t, "forge-worker", c.env, "", "-config", p)
			if code == 0 {
				t.Fatalf("exit 0; stderr %s", stderr)
			}
			if stderr == "" {
				t.Error("no message on stderr")
			}
			if strings.Contains(stdout+stderr, tok) {
				t.Errorf("output contains the token: %s", stderr)
			}
		})
	}
	// Usage errors.
	for _, args := range [][]string{{}, {"-config"}, {"-token", tok}, {"-config", "a", "b"}} {
		code, _, stderr := runBinary(t, "forge-worker", env, "", args...)
		if code != 2 || strings.Contains(stderr, tok) {
			t.Errorf("%v: exit %d, stderr %s", args, code, stderr)
		}
	}
}

package gate

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	testKeyOnce sync.Once
	testKeyPEM  []byte
)

// writeAppKey writes a fresh-looking App key (one per test binary) as a
// 0600 file in a private directory and returns its path.
func writeAppKey(t *testing.T) string {
	t.Helper()
	testKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	})
	dir := filepath.Join(t.TempDir(), "secrets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(p, testKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func deliverySection(keyPath string) map[string]any {
	return map[string]any{"api_base": "https://api.github.com", "github_app_id_env": "FORGE_GITHUB_APP_ID",
		"github_app_private_key_path": keyPath, "max_attempts": 3, "retry_base": "5s", "poll_interval": "10s",
		"no_runs_grace": "2m", "timeout": "30m"}
}

// withDelivery adds the delivery section and the git_executable it needs.
func withDelivery(t testing.TB, m map[string]any, d map[string]any) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err == nil {
		git, err = filepath.EvalSymlinks(git)
	}
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	m["delivery"], m["git_executable"] = d, git
}

func deliveryEnv() map[string]string {
	e := defaultEnv()
	e["FORGE_GITHUB_APP_ID"] = "123456"
	return e
}

func TestDeliveryConfigLoads(t *testing.T) {
	key := writeAppKey(t)
	data := edit(t, func(m map[string]any) { withDelivery(t, m, deliverySection(key)) })
	c, s, err := LoadConfig(bytes.NewReader(data), testEnv(deliveryEnv()))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Delivery
	if d == nil || d.MaxAttempts != 3 || d.Timeout.Std() != 30*time.Minute || d.NoRunsGrace.Std() != 2*time.Minute {
		t.Fatalf("decoded %+v", d)
	}
	if s.app == nil || s.app.appID != "123456" || s.app.key == nil {
		t.Fatal("app credentials not loaded")
	}
	// The scan set holds the tokens and the key (in the forms delivery
	// scans candidates for).
	env := deliveryEnv()
	for _, doc := range []string{env["FORGE_OWNER_TOKEN"], env["FORGE_WORKER_TOKEN"], base64.StdEncoding.EncodeToString(s.app.key.D.Bytes())} {
		if !s.scan.Contains([]byte("x" + doc + "y")) {
			t.Fatalf("scan set misses a secret")
		}
	}
	if g := (&Gate{sec: s, cfg: c}).gitHubApp(t.TempDir()); g.Secrets != s.scan {
		t.Fatal("delivery does not scan for the Gate's secrets")
	}
	mc := d.machineConfig()
	if mc.MaxAttempts != 3 || mc.RetryBase != 5*time.Second || mc.PollInterval != 10*time.Second || mc.Validate() != nil {
		t.Fatalf("machine config %+v", mc)
	}
	// Without the section nothing about delivery is read.
	c, s, err = LoadConfig(bytes.NewReader(exampleConfig(t)), testEnv(defaultEnv()))
	if err != nil || c.Delivery != nil || s.app != nil || s.scan != nil {
		t.Fatalf("without delivery: %v %+v", err, c.Delivery)
	}
}

func TestDeliveryConfigRejects(t *testing.T) {
	key := writeAppKey(t)
	set := func(k string, v any) func(map[string]any) {
		return func(d map[string]any) { d[k] = v }
	}
	cases := []struct {
		name, field string
		mut         func(map[string]any)
	}{
		{"other api", "delivery.api_base", set("api_base", "https://github.example.com")},
		{"api slash", "delivery.api_base", set("api_base", "https://api.github.com/")},
		{"bad env", "delivery.github_app_id_env", set("github_app_id_env", "1X")},
		{"owner env", "delivery.github_app_id_env", set("github_app_id_env", "FORGE_OWNER_TOKEN")},
		{"relative key", "delivery.github_app_private_key_path", set("github_app_private_key_path", "app.pem")},
		{"zero attempts", "delivery.max_attempts", set("max_attempts", 0)},
		{"many attempts", "delivery.max_attempts", set("max_attempts", 21)},
		{"bad duration", "delivery.poll_interval", set("poll_interval", "often")},
		{"fast poll", "delivery.poll_interval", set("poll_interval", "10ms")},
		{"zero grace", "delivery.no_runs_grace", set("no_runs_grace", "0s")},
		{"timeout under grace", "delivery.timeout", set("timeout", "1m")},
		{"unknown field", "delivery", set("token", "x")},
		{"missing field", "delivery", func(d map[string]any) { delete(d, "timeout") }},
	}
	noGit := edit(t, func(m map[string]any) { m["delivery"] = deliverySection(key) })
	var ce *ConfigError
	if _, _, err := LoadConfig(bytes.NewReader(noGit), testEnv(deliveryEnv())); !errors.As(err, &ce) || ce.Field != "git_executable" {
		t.Errorf("delivery without git_executable: %v", err)
	}
	for _, tc := range cases {
		data := edit(t, func(m map[string]any) {
			d := deliverySection(key)
			tc.mut(d)
			withDelivery(t, m, d)
		})
		_, _, err := LoadConfig(bytes.NewReader(data), testEnv(deliveryEnv()))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, tc.field) {
			t.Errorf("%s: %v, want field %s", tc.name, err, tc.field)
		}
	}
}

func TestDeliveryCredentialsRefused(t *testing.T) {
	loadWith := func(key string, env map[string]string) error {
		data := edit(t, func(m map[string]any) { withDelivery(t, m, deliverySection(key)) })
		_, _, err := LoadConfig(bytes.NewReader(data), testEnv(env))
		return err
	}
	key := writeAppKey(t)
	noID := deliveryEnv()
	delete(noID, "FORGE_GITHUB_APP_ID")
	badID := deliveryEnv()
	badID["FORGE_GITHUB_APP_ID"] = "12 34"
	for name, env := range map[string]map[string]string{"unset app id": noID, "bad app id": badID} {
		if err := loadWith(key, env); err == nil || !strings.Contains(err.Error(), "delivery.github_app_id_env") || strings.Contains(err.Error(), "12 34") {
			t.Errorf("%s: %v", name, err)
		}
	}
	keyField := "delivery.github_app_private_key_path"
	check := func(name, path string) {
		t.Helper()
		err := loadWith(path, deliveryEnv())
		if err == nil || !strings.Contains(err.Error(), keyField) || strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	loose := writeAppKey(t)
	os.Chmod(loose, 0o640)
	check("group-readable key", loose)
	open := writeAppKey(t)
	os.Chmod(filepath.Dir(open), 0o770)
	check("group-writable directory", open)
	link := filepath.Join(filepath.Dir(writeAppKey(t)), "link.pem")
	os.Symlink(key, link)
	check("symlink", link)
	check("missing", filepath.Join(filepath.Dir(key), "absent.pem"))
	garbage := writeAppKey(t)
	os.WriteFile(garbage, []byte("-----BEGIN NOTHING-----\n"), 0o600)
	check("not a key", garbage)
	check("directory", filepath.Dir(key))
}

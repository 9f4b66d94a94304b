package gate

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// TestSyncReplicationUnconfirmedWrites: a Gate in "sync" mode whose
// Litestream goes away answers a submit 503 unavailable once the store's
// retries run out (it acknowledged it before the change: the old Gate
// stopped on the store error instead), keeps serving reads, warns, and
// acknowledges submits again once Litestream is back.
func TestSyncReplicationUnconfirmedWrites(t *testing.T) {
	bin, err := exec.LookPath("litestream")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("litestream is not installed (.ci/run installs it)")
		}
		t.Skip("litestream is not installed")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(root, "state", "forge.db")
	sock := filepath.Join(root, "litestream.sock")
	cfgPath := filepath.Join(root, "litestream.yml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("socket:\n  enabled: true\n  path: %s\n  permissions: 0600\ndbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n",
		sock, db, filepath.Join(root, "replica"))), 0o600)
	var ls *exec.Cmd
	start := func() {
		os.Remove(sock)
		ls = exec.Command(bin, "replicate", "-config", cfgPath)
		ls.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := ls.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("litestream's control socket did not appear")
			}
		}
	}
	kill := func() {
		if ls != nil {
			syscall.Kill(-ls.Process.Pid, syscall.SIGKILL)
			ls.Wait()
			ls = nil
		}
	}
	defer kill()
	start()

	cfg, sec := testConfig(t, func(m map[string]any) {
		m["database"], m["replication"], m["replication_socket"] = db, "sync", sock
	})
	st, err := store.OpenReplicated(context.Background(), db, cfg.replication())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	tg := startGateOn(t, cfg, sec, db, st, time.Now, logs, nil)
	first := tg.submit(`{"input":"hello"}`)

	kill()
	code, body := tg.api("POST", "/v1/jobs", testOwnerToken, []byte(`{"input":"unconfirmed"}`))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("submit without litestream: %d %s", code, body)
	}
	if j := tg.job(first.ID); j.ID != first.ID {
		t.Fatalf("read without litestream: %+v", j)
	}
	if code, _ := tg.api("GET", "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz without litestream: %d", code)
	}
	start()
	tg.submit(`{"input":"again"}`)
	if !strings.Contains(logs.String(), "the replica did not confirm a write") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

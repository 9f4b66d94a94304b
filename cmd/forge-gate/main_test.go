package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const exampleConfig = `{"version":1,"listen":"127.0.0.1:0","database":"DB","owner_token_env":"FGT_OWNER","recovery_interval":"1s","lease_poll_interval":"100ms","default_pool":"coding","lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":3},"default_execution":{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},"workers":[{"id":"worker-1","pool":"coding","token_env":"FGT_WORKER","concurrency":2}],"repositories":[]}`

func writeConfig(t *testing.T, body string) string {
	dir := t.TempDir()
	body = strings.Replace(body, "DB", filepath.Join(dir, "state", "forge.db"), 1)
	p := filepath.Join(dir, "gate.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUsageAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, nil, &out, &errb); err != nil || !strings.HasPrefix(out.String(), "forge-gate ") {
		t.Fatalf("version: %v %q", err, out.String())
	}
	// A valid config given twice (or after another -config) must still be
	// a usage error: the context is already cancelled so a wrongly accepted
	// command line cannot block, and it would exit 0 or 1, not 2.
	valid := writeConfig(t, exampleConfig)
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{}, {"-config"}, {"-config", "a", "extra"}, {"-listen", "x"},
		{"-config", "/nonexistent.json", "-config", valid}, {"-config", valid, "-config", valid},
		{"-config=" + valid, "--config", valid}, {"--version", "--version"}} {
		out.Reset()
		errb.Reset()
		if err := run(stopped, args, nil, &out, &errb); exitCode(err) != 2 {
			t.Fatalf("%v: exit %d", args, exitCode(err))
		}
		if out.Len() != 0 || !strings.Contains(errb.String(), "usage:") {
			t.Fatalf("%v: stdout %q stderr %q", args, out.String(), errb.String())
		}
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	ch chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	select {
	case s.ch <- struct{}{}:
	default:
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBadConfigNeverLeaksTokens(t *testing.T) {
	t.Setenv("FGT_OWNER", "owner-secret-value")
	t.Setenv("FGT_WORKER", "owner-secret-value") // collides
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"-config", writeConfig(t, exampleConfig)}, nil, &out, &errb)
	if exitCode(err) != 1 || !strings.Contains(errb.String(), "workers[0].token_env") {
		t.Fatalf("exit %d, stderr %s", exitCode(err), errb.String())
	}
	if strings.Contains(errb.String(), "owner-secret-value") || strings.Contains(err.Error(), "owner-secret-value") {
		t.Fatal("token value leaked")
	}
}

func TestServeAndGracefulShutdown(t *testing.T) {
	t.Setenv("FGT_OWNER", "owner-secret-value")
	t.Setenv("FGT_WORKER", "worker-secret-value")
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{ch: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", writeConfig(t, exampleConfig)}, nil, nil, logs) }()
	var addr string
	for addr == "" {
		select {
		case <-logs.ch:
		case err := <-done:
			t.Fatalf("stopped early: %v %s", err, logs.String())
		case <-time.After(20 * time.Second):
			t.Fatal("no listening event")
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			var ev struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Msg == "listening" {
				addr = ev.Addr
			}
		}
	}
	// Listening comes before readiness: wait for /readyz like a script.
	for ready := false; !ready; {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ready = resp.StatusCode == http.StatusOK
		if !ready {
			select {
			case <-logs.ch:
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/jobs", strings.NewReader(`{"input":"private task text"}`))
	req.Header.Set("Authorization", "Bearer owner-secret-value")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	s := logs.String()
	if strings.Count(s, `"msg":"listening"`) != 1 {
		t.Fatalf("listening events: %s", s)
	}
	for _, secret := range []string{"owner-secret-value", "worker-secret-value", "private task text"} {
		if strings.Contains(s, secret) {
			t.Fatalf("log leaks %q", secret)
		}
	}
}

// TestStopDuringStartupIsNotAFailure: a SIGTERM/SIGINT that arrives before
// the Gate finished starting (here: before it opened its new database) is a
// requested stop: exit 0, an info "stopped during startup", no ERROR line.
func TestStopDuringStartupIsNotAFailure(t *testing.T) {
	t.Setenv("FGT_OWNER", "owner-secret-value")
	t.Setenv("FGT_WORKER", "worker-secret-value")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	err := run(ctx, []string{"-config", writeConfig(t, exampleConfig)}, nil, &out, &errb)
	if exitCode(err) != 0 {
		t.Fatalf("exit %d (%v), stderr %s", exitCode(err), err, errb.String())
	}
	if strings.Contains(errb.String(), `"level":"ERROR"`) || !strings.Contains(errb.String(), "stopped during startup") {
		t.Fatalf("stderr %s", errb.String())
	}
}

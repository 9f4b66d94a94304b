package acceptance

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestCLIAsARealClient drives the forge CLI against a real Gate and Worker
// and checks every documented exit code, that stdout is only JSON, that
// stderr lines are prefixed, and that the token never shows up.
func TestCLIAsARealClient(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{maxAttempts: 1})
	env := []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=" + g.url(), "FORGE_OWNER_TOKEN=" + g.owner}
	forge := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		code, out, errOut := runBinary(t, "forge", env, stdin, args...)
		if strings.Contains(out+errOut, g.owner) {
			t.Fatalf("forge %v printed the token", args)
		}
		for _, l := range strings.Split(strings.TrimSuffix(errOut, "\n"), "\n") {
			if code == 2 {
				break // usage text
			}
			if l != "" && !strings.HasPrefix(l, "forge: ") && !strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "Usage") && !strings.HasPrefix(l, "usage") {
				t.Errorf("forge %v: stderr line without prefix: %q", args, l)
			}
		}
		if out != "" && !json.Valid([]byte(out)) {
			t.Errorf("forge %v: stdout is not JSON: %q", args, out)
		}
		if code != 0 && code != 3 && out != "" {
			t.Errorf("forge %v: exit %d with stdout %q", args, code, out)
		}
		if code != 0 && code != 3 && len(args) > 0 && !strings.Contains(errOut, "forge: error: ") {
			t.Errorf("forge %v: exit %d without forge: error: %q", args, code, errOut)
		}
		return code, out, errOut
	}
	expect := func(want int, stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := forge(stdin, args...)
		if code != want {
			t.Fatalf("forge %v: exit %d, want %d; stderr %s", args, code, want, errOut)
		}
		return out
	}

	// Usage (2).
	for _, args := range [][]string{
		{}, {"nope"}, {"status"}, {"status", "a", "b"}, {"status", "-token", "x", "abc"},
		{"status", "../etc"}, {"status", strings.Repeat("a", 129)}, {"status", "a b"},
		{"status", "-url", "ftp://x", "abc"}, {"status", "-url", "http://u:p@127.0.0.1:1", "abc"},
		{"status", "-url", "http://127.0.0.1:1/?q=1", "abc"}, {"status", "-token-env", "1BAD=", "abc"},
		{"wait", "-timeout", "forever", "abc"}, {"wait", "-poll", "1ns", "abc"},
	} {
		expect(2, "", args...)
	}
	// Errors (1): bad task files, Gate error answers, network, token.
	for _, task := range []string{"", "{}", `{"input":""}`, `{"input":"a","input":"b"}`, `{"input":null}`, `{"input":"a"} x`,
		`{"Input":"a"}`, `{"input":"` + marker + `"}{"input":"b"}`, "{\"input\":\"\xff\"}", `[]`} {
		code, _, errOut := forge(task, "submit", "-file", "-")
		if code != 1 {
			t.Errorf("submit %q: exit %d", task, code)
		}
		if strings.Contains(errOut, marker) {
			t.Errorf("submit error echoes task text: %s", errOut)
		}
	}
	missing := filepath.Join(t.TempDir(), "secret-dir", "task.json")
	if _, _, errOut := forge("", "submit", "-file", missing); strings.Contains(errOut, "secret-dir") {
		t.Errorf("error names the file path: %s", errOut)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	must(t, os.WriteFile(big, []byte(`{"input":"`+strings.Repeat("a", 2<<20)+`"}`), 0o600))
	for _, f := range []string{dir, big, "/dev/null"} {
		if code, _, errOut := forge("", "submit", "-file", f); code != 1 || strings.Contains(errOut, dir) {
			t.Errorf("submit -file %s: exit %d, stderr %q", f, code, errOut)
		}
	}
	for _, tok := range []string{strings.Repeat("t", 4097), "tok en", "tok\x7f"} {
		code, _, errOut := runBinary(t, "forge", []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=" + g.url(), "FORGE_OWNER_TOKEN=" + tok}, "", "status", "abc")
		if code != 1 || strings.Contains(errOut, tok) {
			t.Errorf("malformed token: exit %d, stderr %q", code, errOut)
		}
	}
	expect(1, "", "status", strings.Repeat("a", 32))
	code, _, _ := runBinary(t, "forge", []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=" + g.url()}, "", "status", "abc")
	if code != 1 {
		t.Errorf("missing token: exit %d", code)
	}
	code, _, errOut := runBinary(t, "forge", []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=" + g.url(), "FORGE_OWNER_TOKEN=wrong" + g.owner}, "", "status", "abc")
	if code != 1 || !strings.Contains(errOut, "unauthorized") || strings.Contains(errOut, g.owner) {
		t.Errorf("wrong token: exit %d %s", code, errOut)
	}
	code, _, _ = runBinary(t, "forge", []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=http://127.0.0.1:1", "FORGE_OWNER_TOKEN=" + g.owner}, "", "status", "abc")
	if code != 1 {
		t.Errorf("network error: exit %d", code)
	}

	// Success (0), timeout (4), failed (3).
	out := expect(0, `{"input":"ok cli `+marker+`"}`, "submit", "-file", "-")
	var job apiJob
	if err := json.Unmarshal([]byte(out), &job); err != nil || job.Status != "pending" {
		t.Fatalf("submit: %s", out)
	}
	if out := expect(4, "", "wait", "-timeout", "300ms", "-poll", "50ms", job.ID); out != "" {
		t.Fatalf("timed-out wait printed %q", out)
	}
	expect(0, "", "status", job.ID)
	expect(0, "", "events", job.ID)
	expect(0, "", "result", job.ID)
	g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	var agg aggregate
	out = expect(0, "", "wait", "-timeout", "60s", "-poll", "20ms", job.ID)
	if err := json.Unmarshal([]byte(out), &agg); err != nil || agg.Job.Status != "succeeded" || *agg.Job.Result != "CLI "+strings.ToUpper(marker) {
		t.Fatalf("wait: %s", out)
	}
	out = expect(3, `{"input":"failure"}`, "submit", "-file", "-", "-wait", "-timeout", "60s", "-poll", "20ms")
	if err := json.Unmarshal([]byte(out), &agg); err != nil || agg.Job.Status != "failed" || agg.Job.FailureCode != "max_attempts_exceeded" {
		t.Fatalf("failed wait: %s", out)
	}
	expect(0, "", "result", agg.Job.ID) // result exits 0 whatever the status
	expect(3, "", "wait", agg.Job.ID)
	g.assertNoSecrets(t, marker)
}

// TestCLIWaitSurvivesGateRestart: `forge wait` keeps polling through a
// Gate crash and restart on the same address and prints the aggregate
// once the job succeeds.
func TestCLIWaitSurvivesGateRestart(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{listen: freePort(t)})
	id := g.submit(t, `{"input":"ok across restarts"}`)
	// A pass-through proxy tells the test when the first poll got through.
	target, _ := url.Parse(g.url())
	rp := httputil.NewSingleHostReverseProxy(target)
	first := make(chan struct{})
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if rec.Code == http.StatusOK {
			once.Do(func() { close(first) })
		}
	}))
	t.Cleanup(proxy.Close)
	env := []string{"PATH=" + os.Getenv("PATH"), "FORGE_GATE_URL=" + proxy.URL, "FORGE_OWNER_TOKEN=" + g.owner}
	type res struct {
		code     int
		out, err string
	}
	done := make(chan res, 1)
	go func() {
		code, out, errOut := runBinary(t, "forge", env, "", "wait", "-timeout", "60s", "-poll", "20ms", id)
		done <- res{code, out, errOut}
	}()
	// Let the first poll happen (it must succeed), then crash and restart.
	<-first
	g.kill()
	g.start()
	g.startWorker(t, workerOpts{plugins: map[string]string{"reference": scenarioPlugin(t)}})
	r := <-done
	var agg aggregate
	if r.code != 0 || json.Unmarshal([]byte(r.out), &agg) != nil || agg.Job.Status != "succeeded" || *agg.Job.Result != "ACROSS RESTARTS" {
		t.Fatalf("wait: exit %d stdout %q stderr %q", r.code, r.out, r.err)
	}
}

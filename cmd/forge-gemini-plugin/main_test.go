package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/agentplugin"
	"github.com/0k-lab/agent-forge/pkg/agenttest"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/conformance"
)

// pluginArg turns the test binary into forge-gemini-plugin (see TestMain).
const pluginArg = "forge-gemini-plugin-under-test"

func TestMain(m *testing.M) {
	agenttest.ServeReaper()
	if len(os.Args) > 1 && os.Args[1] == pluginArg {
		os.Exit(agentplugin.ExitCode(agentplugin.Run(context.Background(), geminiPlugin(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr)))
	}
	os.Exit(m.Run())
}

// TestConformanceWithFakeGemini runs the protocol suite for workspace_edit
// against this binary driving the fake Gemini CLI.
func TestConformanceWithFakeGemini(t *testing.T) {
	self, reapers := agenttest.Self(t), agenttest.Reapers(t)
	sum, err := conformance.Run(context.Background(), conformance.Config{
		Command:   []string{self, pluginArg},
		Operation: plugin.OpWorkspaceEdit,
		Env: append(agenttest.GatewayEnv("gemini=gemini-generate-content"), "PATH=/usr/bin:/bin", "GEMINI_BIN="+agenttest.Program(t, "fake-gemini-cli/gemini"),
			"GORACE=atexit_sleep_ms=0"),
		TempDir: t.TempDir(),
		Reaper:  reapers,
	}, func(r conformance.Result) {
		if !r.Passed() {
			t.Errorf("%s", r.Line())
		}
	})
	if err != nil || sum.Failed != 0 || sum.Total == 0 {
		t.Fatalf("conformance: %+v, %v", sum, err)
	}
}

// TestInvalidProfileIsAMisconfiguration: the plugin negotiates and answers
// failure incompatible without starting Gemini CLI.
func TestInvalidProfileIsAMisconfiguration(t *testing.T) {
	for name, c := range map[string]struct{ doc, reason string }{
		"unknown member": {`{"version":1,"approval_mode":"canary-yolo"}`, ""},
		"key member":     {`{"version":1,"api_key_env":"CANARY_KEY"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bad := filepath.Join(dir, "gemini.json")
			os.WriteFile(bad, []byte(c.doc), 0o600)
			ws := t.TempDir()
			exec.Command("git", "-C", ws, "init", "-q").Run()
			record := filepath.Join(dir, "argv.json")
			in := `{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"initialize","capabilities":["workspace_edit","commit_subject"],"limits":{"frame_bytes":1048576,"progress_frames":128,"text_bytes":65536,"progress_text_bytes":1024,"commit_subject_bytes":256}}
{"version":"v1","id":"0123456789abcdef0123456789abcdef","type":"execute","operation":"workspace_edit","workspace":"` + ws + `","instruction":"edit","timeout_ms":60000}
`
			inR, inW := io.Pipe()
			var out, errb bytes.Buffer
			done := make(chan error, 1)
			go func() {
				done <- agentplugin.RunWith(context.Background(), geminiPlugin(), agentplugin.Setup{
					Env: append(agenttest.GatewayEnv("gemini=gemini-generate-content"), "PATH=/usr/bin:/bin", "GEMINI_BIN="+agenttest.Program(t, "fake-gemini-cli/gemini"), "FAKE_GEMINI_ARGV_FILE="+record),
				}, []string{"-profile", bad}, inR, &out, &errb)
			}()
			io.WriteString(inW, in)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), `"type":"failure"`) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			inW.Close()
			if err := <-done; err != nil {
				t.Fatalf("session: %v", err)
			}
			if !strings.Contains(out.String(), `"type":"failure","category":"incompatible"`) {
				t.Fatalf("stdout %q", out.String())
			}
			if !strings.HasPrefix(errb.String(), "forge-gemini-plugin: error: gemini profile: "+c.reason) || strings.Contains(errb.String(), "canary") ||
				strings.Contains(errb.String(), "CANARY") {
				t.Fatalf("stderr %q", errb.String())
			}
			if _, err := os.Stat(record); err == nil {
				t.Fatal("Gemini CLI started with an invalid profile")
			}
		})
	}
}

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := agentplugin.RunWith(context.Background(), geminiPlugin(), agentplugin.Setup{}, []string{"--version"}, strings.NewReader(""), &out, &errb); err != nil ||
		!strings.HasPrefix(out.String(), "forge-gemini-plugin ") {
		t.Fatalf("version: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := agentplugin.RunWith(context.Background(), geminiPlugin(), agentplugin.Setup{}, []string{"--cli"}, strings.NewReader(""), &out, &errb); err != nil ||
		out.String() != "GEMINI_BIN gemini @google/gemini-cli@0.61.0\n" {
		t.Fatalf("cli: %q, %v", out.String(), err)
	}
	out.Reset()
	err := agentplugin.RunWith(context.Background(), geminiPlugin(), agentplugin.Setup{}, []string{"extra"}, strings.NewReader(""), &out, &errb)
	if agentplugin.ExitCode(err) != 2 || out.Len() != 0 {
		t.Fatalf("usage: exit %d, stdout %q", agentplugin.ExitCode(err), out.String())
	}
}

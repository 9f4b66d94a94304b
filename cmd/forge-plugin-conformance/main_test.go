package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/conformance"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
		os.Exit(supervise.ReaperMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func buildRef(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "forge-ref-plugin")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/forge-ref-plugin")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return exitCode(err), out.String(), errOut.String()
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := map[string][]string{
		"no plugin":     {},
		"bad operation": {"-operation", "shout", "plugin"},
		"bad timeout":   {"-timeout", "0s", "plugin"},
		"unknown flag":  {"-nope", "plugin"},
		"bad pattern":   {"-run", "(", "plugin"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Fatalf("usage error wrote stdout: %q", stdout)
			}
			if !strings.Contains(stderr, "usage: forge-plugin-conformance") {
				t.Fatalf("stderr lacks usage: %q", stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runCLI("-version")
	if code != 0 || !strings.HasPrefix(stdout, "forge-plugin-conformance ") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestListPrintsEveryScenario(t *testing.T) {
	for _, op := range []string{"text", "workspace_edit"} {
		code, stdout, _ := runCLI("-operation", op, "-list")
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != 0 || len(lines) != len(conformance.Scenarios(plugin.Operation(op))) {
			t.Fatalf("%s: exit %d, %d lines", op, code, len(lines))
		}
		if !strings.HasPrefix(lines[0], "session-valid\tsession\t") {
			t.Fatalf("%s: first line %q", op, lines[0])
		}
	}
}

func TestReferencePluginPasses(t *testing.T) {
	code, stdout, stderr := runCLI("-run", "^(session-valid|session-host-runner|framing-crlf-initialize|order-second-execute)$", buildRef(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := []string{"PASS session-valid", "PASS session-host-runner", "PASS framing-crlf-initialize",
		"PASS order-second-execute", "PASS conformance (text): 4 scenarios, 4 passed, 0 failed"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stdout:\n%s\nwant:\n%s", stdout, strings.Join(want, "\n"))
	}
}

func TestFailingPluginExits1(t *testing.T) {
	code, stdout, _ := runCLI("-run", "^(session-valid|version-v2)$", "cat")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"FAIL session-valid: ", "FAIL version-v2: ", "FAIL conformance (text): 2 scenarios, 0 passed, 2 failed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestMissingPluginExits1(t *testing.T) {
	code, _, stderr := runCLI("no-such-plugin-for-conformance")
	if code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

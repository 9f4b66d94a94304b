package github

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestDerivePermissions(t *testing.T) {
	base := Permissions{PermContents: Write, PermPullRequests: Write}
	withWF := Permissions{PermContents: Write, PermPullRequests: Write, PermWorkflows: Write}
	for _, tc := range []struct {
		name  string
		paths []string
		want  Permissions
	}{
		{"none", nil, base},
		{"code", []string{"main.go", "docs/a.md"}, base},
		{"workflow file", []string{"a", ".github/workflows/ci.yml"}, withWF},
		{"nested", []string{".github/workflows/sub/x.yml"}, withWF},
		{"workflows as a file", []string{".github/workflows"}, withWF},
		{"sibling dir", []string{".github/workflows2/x.yml", ".github/CODEOWNERS", ".github/workflow/x"}, base},
		{"other case", []string{".GitHub/workflows/x.yml"}, base},
		{"nested repo path", []string{"sub/.github/workflows/x.yml"}, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DerivePermissions(tc.paths)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("got %v want %v", got, tc.want)
				}
			}
		})
	}
}

func TestSafeBranch(t *testing.T) {
	for b, want := range map[string]bool{
		"forge/job-123": true, "main": true, "release/1.2": true,
		"": false, "HEAD": false, "refs/heads/x": false, "-x": false, "a..b": false, "a b": false,
		"x.lock": false, "a@{1}": false, "a//b": false, "a/.b": false, "a~1": false, "a^": false, "a:b": false,
		strings.Repeat("a", 40): false, strings.Repeat("A", 40): false, strings.Repeat("a", 39): true,
		"a\x00b": false, "ünï": false, strings.Repeat("b", 256): false,
		"x.lock/y": false, "a/b.lock/c": false, "a.lockx/b": true, "a/-b": true,
	} {
		if SafeBranch(b) != want {
			t.Errorf("SafeBranch(%q) = %v", b, !want)
		}
	}
}

func TestRedact(t *testing.T) {
	jwt := "eyJhbGciOiJSUzI1NiJ9.eyJpYXQiOjF9.c2ln-_x"
	for in, want := range map[string]string{
		"token ghs_abcDEF123 end":           "token [redacted] end",
		"ghp_x":                             "[redacted]",
		"github_pat_11AA_bb":                "[redacted]",
		"new ghs_12345_" + jwt + " format":  "new [redacted] format",
		"bearer " + jwt:                     "bearer [redacted]",
		"plain ghs_ alone":                  "plain ghs_ alone",
		"eyJ not a jwt":                     "eyJ not a jwt",
		"secret-value-123 and more":         "[redacted] and more",
		"Authorization: Basic eC1hY2Nlc3M=": "Authorization: Basic eC1hY2Nlc3M=",
	} {
		if got := Redact(in, "secret-value-123", "short"); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if Redact("a short b", "short") != "a short b" {
		t.Error("short known secret replaced")
	}
}

// Every name SafeBranch accepts is one git itself accepts as a branch
// (else the push would fail only after a token was minted).
func TestSafeBranchIsAGitBranch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	for _, b := range []string{"forge/job-1", "x.lock/y", "a/b.lock/c", "a.lock.b/c", "a/-b", "a-/b", "a/b.", "a./b",
		"a_b/C.d", "a/b_/c", "x/lock", ".lock/a", "a/.lock", "a.lock", "a/..b", "a-.lock/b"} {
		if !SafeBranch(b) {
			continue
		}
		cmd := exec.Command("git", "check-ref-format", "--branch", b)
		cmd.Env = []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
		cmd.Dir = t.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("SafeBranch(%q) but git refuses it: %s", b, out)
		}
	}
}

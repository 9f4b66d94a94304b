package gate

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testPublicURL = "https://github.com/octo-org/hello.git"

// publicConfig is the example config with repository 0 a public source
// under a fresh private root.
func publicConfig(tb testing.TB, f func(m map[string]any)) []byte {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "public")
	if err := os.Mkdir(root, 0o700); err != nil {
		tb.Fatal(err)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		tb.Fatal(err)
	}
	if git, err = filepath.EvalSymlinks(git); err != nil {
		tb.Fatal(err)
	}
	return edit(tb, func(m map[string]any) {
		m["public_repository_root"] = root
		m["git_executable"] = git
		repo0(m)["repository_url"] = testPublicURL
		if f != nil {
			f(m)
		}
	})
}

func TestConfigPublicSource(t *testing.T) {
	c, _, err := LoadConfig(bytes.NewReader(publicConfig(t, nil)), testEnv(defaultEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Repositories[0].RepositoryURL != testPublicURL || !c.hasPublicSources() {
		t.Fatalf("decoded %+v", c.Repositories[0])
	}
	if c.candidateRefTTL() != DefaultCandidateRefTTL || c.repackPacks() != DefaultRepackPacks {
		t.Fatalf("maintenance defaults: %v %d", c.candidateRefTTL(), c.repackPacks())
	}
	c, _, err = LoadConfig(bytes.NewReader(publicConfig(t, func(m map[string]any) {
		m["candidate_ref_ttl"], m["repack_packs"], m["candidate_git_memory_bytes"] = "48h", 7, 64<<20
	})), testEnv(defaultEnv()))
	if err != nil || c.candidateRefTTL() != 48*time.Hour || c.repackPacks() != 7 || c.CandidateGitMemoryBytes != 64<<20 {
		t.Fatalf("maintenance settings: %v", err)
	}
}

func TestConfigPublicSourceRejects(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o750)
	link := filepath.Join(dir, "link")
	os.Symlink(open, link)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o700)
	gitLink := filepath.Join(dir, "git-link")
	git, _ := exec.LookPath("git")
	os.Symlink(git, gitLink)
	plain := filepath.Join(dir, "not-exec")
	os.WriteFile(plain, []byte("x"), 0o600)
	writable := filepath.Join(dir, "writable")
	os.WriteFile(writable, []byte("#!/bin/sh\n"), 0o777)
	os.Chmod(writable, 0o777)
	set := func(k string, v any) func(m map[string]any) { return func(m map[string]any) { m[k] = v } }
	cases := []struct {
		name, field string
		f           func(m map[string]any)
	}{
		{"bad url", "repositories[0].repository_url", func(m map[string]any) { repo0(m)["repository_url"] = "https://github.com/octo-org/hello" }},
		{"url with credentials", "repositories[0].repository_url", func(m map[string]any) {
			repo0(m)["repository_url"] = "https://token@github.com/octo-org/hello.git"
		}},
		{"same repository twice", "repositories[1].repository_url", func(m map[string]any) {
			r := map[string]any{}
			for k, v := range repo0(m) {
				r[k] = v
			}
			r["id"], r["repository_url"] = "other", "https://github.com/Octo-Org/Hello.git"
			m["repositories"] = append(m["repositories"].([]any), r)
		}},
		{"root missing", "public_repository_root", func(m map[string]any) { delete(m, "public_repository_root") }},
		{"git missing", "git_executable", func(m map[string]any) { delete(m, "git_executable") }},
		{"root relative", "public_repository_root", set("public_repository_root", "srv/public")},
		{"root unclean", "public_repository_root", set("public_repository_root", dir+"/./open")},
		{"root absent", "public_repository_root", set("public_repository_root", filepath.Join(dir, "absent"))},
		{"root group readable", "public_repository_root", set("public_repository_root", open)},
		{"root symlink", "public_repository_root", set("public_repository_root", link)},
		{"root a file", "public_repository_root", set("public_repository_root", file)},
		{"git relative", "git_executable", set("git_executable", "git")},
		{"git symlink", "git_executable", set("git_executable", gitLink)},
		{"git not executable", "git_executable", set("git_executable", plain)},
		{"git a directory", "git_executable", set("git_executable", dir)},
		{"git absent", "git_executable", set("git_executable", filepath.Join(dir, "absent"))},
		{"git writable", "git_executable", set("git_executable", writable)},
		{"ref ttl too short", "candidate_ref_ttl", set("candidate_ref_ttl", "59m")},
		{"ref ttl too long", "candidate_ref_ttl", set("candidate_ref_ttl", "87601h")},
		{"ref ttl negative", "candidate_ref_ttl", set("candidate_ref_ttl", "-1h")},
		{"repack packs negative", "repack_packs", set("repack_packs", -1)},
		{"repack packs too many", "repack_packs", set("repack_packs", 10001)},
		{"git memory too small", "candidate_git_memory_bytes", set("candidate_git_memory_bytes", 64<<20-1)},
		{"git memory too large", "candidate_git_memory_bytes", set("candidate_git_memory_bytes", int64(64<<30+1))},
		{"git unclean", "git_executable", set("git_executable",
			filepath.Dir(git)+"/../"+filepath.Base(filepath.Dir(git))+"/git")},
	}
	if os.Geteuid() == 0 {
		// Only root can give a directory away; CI runs as root.
		foreign := filepath.Join(dir, "foreign")
		os.Mkdir(foreign, 0o700)
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name, field string
			f           func(m map[string]any)
		}{"root owned by another user", "public_repository_root", set("public_repository_root", foreign)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, s, err := LoadConfig(bytes.NewReader(publicConfig(t, tc.f)), testEnv(defaultEnv()))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || c != nil || s != nil {
				t.Fatalf("got %v, want a ConfigError naming %s", err, tc.field)
			}
			for _, leak := range []string{dir, "octo", "hello", "Hello", "token", os.TempDir()} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error names a value (%q): %v", leak, err)
				}
			}
			if len(err.Error()) > 200 {
				t.Fatalf("error not bounded: %d bytes", len(err.Error()))
			}
		})
	}
}

// The public-source fields are optional: a Gate without public sources may
// set them (validated all the same) or leave them out.
func TestConfigPublicFieldsOptional(t *testing.T) {
	b := publicConfig(t, func(m map[string]any) { delete(repo0(m), "repository_url") })
	if _, _, err := LoadConfig(bytes.NewReader(b), testEnv(defaultEnv())); err != nil {
		t.Fatal(err)
	}
	b = publicConfig(t, func(m map[string]any) {
		delete(repo0(m), "repository_url")
		m["public_repository_root"] = "/nonexistent-forge-root"
	})
	var ce *ConfigError
	if _, _, err := LoadConfig(bytes.NewReader(b), testEnv(defaultEnv())); !errors.As(err, &ce) || ce.Field != "public_repository_root" {
		t.Fatalf("got %v", err)
	}
}

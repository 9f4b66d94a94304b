package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

// CheckHost checks everything about a parsed config that depends on this
// machine, and returns the worker token. getenv is os.Getenv in production.
//
//   - the token variable is set, secretscan.MinSecretBytes (16) to
//     MaxTokenBytes of visible ASCII (it travels in an HTTP header, and
//     candidates are scanned for it);
//   - every plugin executable exists, is a regular file with an execute bit,
//     and matches its pinned sha256 when one is configured;
//   - repository roots and repositories are existing directories whose
//     paths contain no symlink (the configured path is the real path);
//   - worktree_root and runtime_root are directories without symlinks; a
//     missing last path element is created with mode 0700;
//   - every sandbox_read_paths entry exists at its canonical path, and
//     Landlock is available unless the config says "sandbox": "none".
//
// Errors name the field, never the path, the token or a digest.
func CheckHost(c *Config, getenv func(string) string) (string, error) {
	token := getenv(c.TokenEnv)
	if token == "" {
		return "", fieldErr("token_env", "the named environment variable is unset or empty")
	}
	if len(token) > MaxTokenBytes {
		return "", fieldErr("token_env", "the token is too long")
	}
	if len(token) < secretscan.MinSecretBytes {
		// Shorter values cannot be told apart from ordinary text when
		// candidates are scanned for them (coding_secrets.go).
		return "", fieldErr("token_env", "the token must be at least "+strconv.Itoa(secretscan.MinSecretBytes)+" bytes")
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			return "", fieldErr("token_env", "the token must be visible ASCII")
		}
	}
	for i, p := range c.Plugins {
		field := fmt.Sprintf("plugins[%d]", i)
		if err := checkExecutable(p.Argv[0]); err != nil {
			return "", fieldErr(field+".argv[0]", "executable missing or not executable")
		}
		if p.SHA256 != "" {
			sum, err := fileSHA256(p.Argv[0])
			if err != nil {
				return "", fieldErr(field+".argv[0]", "executable unreadable")
			}
			if sum != p.SHA256 {
				return "", fieldErr(field+".sha256", "executable digest does not match")
			}
		}
	}
	for i, root := range c.RepositoryRoots {
		if err := checkRealDir(root); err != nil {
			return "", fieldErr(fmt.Sprintf("repository_roots[%d]", i), err.Error())
		}
	}
	for i, r := range c.Repositories {
		if r.Gate {
			continue // its cache lives under runtime_root (coding_cache.go)
		}
		if err := checkRealDir(r.Path); err != nil {
			return "", fieldErr(fmt.Sprintf("repositories[%d].path", i), err.Error())
		}
	}
	for _, d := range []struct{ field, path string }{{"worktree_root", c.WorktreeRoot}, {"runtime_root", c.RuntimeRoot}} {
		if err := ensurePrivateDir(d.path); err != nil {
			return "", fieldErr(d.field, err.Error())
		}
	}
	if _, err := checkSandboxHost(c); err != nil {
		return "", err
	}
	return token, nil
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable regular file")
	}
	return nil
}

// fileSHA256 returns the lowercase hex SHA-256 of the file's bytes.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkRealDir requires an existing directory whose path resolves to
// itself. The returned error text is fixed (value-free).
func checkRealDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return errors.New("not an existing directory")
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || real != path {
		return errors.New("path is not canonical (symlink in path)")
	}
	return nil
}

// ensurePrivateDir creates path (one level, mode 0700) when it is missing,
// then requires a canonical directory.
func ensurePrivateDir(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return errors.New("missing and cannot be created")
		}
	}
	return checkRealDir(path)
}

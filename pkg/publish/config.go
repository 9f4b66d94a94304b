package publish

import (
	"bytes"
	"crypto/rsa"
	"errors"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"io/fs"
	"path/filepath"

	"github.com/0k-lab/agent-forge/pkg/configfile"
	"github.com/0k-lab/agent-forge/pkg/github"
)

// MaxConfigBytes bounds github.json.
const MaxConfigBytes = 64 << 10

// configFormat is github.json's place in the shared config-loading shape:
// bounded read, version first, strict decode, then Validate.
var configFormat = configfile.Format{Config: "github", Version: 1, MaxBytes: MaxConfigBytes}

const maxPathBytes = 4096

// Config is github.json, version 1.
type Config struct {
	Version                 int    `json:"version"`
	APIBase                 string `json:"api_base"`
	Owner                   string `json:"owner"`
	Repository              string `json:"repository"`
	LocalRepository         string `json:"local_repository"`
	GitExecutable           string `json:"git_executable"`
	GitHubAppIDEnv          string `json:"github_app_id_env"`
	GitHubAppPrivateKeyPath string `json:"github_app_private_key_path"`
}

// Credentials are the App's identity, loaded from what Config names.
type Credentials struct {
	AppID string
	Key   *rsa.PrivateKey
}

// LoadConfig reads and checks the config at path and the App credentials
// it names (the App ID through getenv, the key from its file). Every
// refusal is an *Error of StageConfig naming no value or path.
func LoadConfig(path string, getenv func(string) string) (*Config, *Credentials, error) {
	data, err := readPrivateFile(path, MaxConfigBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fail(StageConfig, CodeConfigUnreadable)
	case errors.Is(err, errTooLarge):
		return nil, nil, fail(StageConfig, CodeConfigInvalid)
	case err != nil:
		return nil, nil, fail(StageConfig, CodeConfigUnsafe)
	}
	var c Config
	if err := configFormat.Load(bytes.NewReader(data), &c); err != nil {
		var ce *configfile.Error
		if errors.As(err, &ce) {
			return nil, nil, &Error{Code: CodeConfigInvalid, Stage: StageConfig, Detail: ce.Error()}
		}
		return nil, nil, err
	}
	if err := checkExecutable(c.GitExecutable); err != nil {
		return nil, nil, fail(StageConfig, CodeGitUnsafe)
	}
	if err := checkWorktree(c.LocalRepository); err != nil {
		return nil, nil, fail(StageConfig, CodeRepositoryUnsafe)
	}
	key, err := github.LoadPrivateKeyFile(c.GitHubAppPrivateKeyPath)
	switch {
	case errors.Is(err, github.ErrKey):
		return nil, nil, fail(StageConfig, CodeKeyInvalid)
	case err != nil:
		return nil, nil, fail(StageConfig, CodeKeyUnsafe)
	}
	id := getenv(c.GitHubAppIDEnv)
	if !github.ValidAppID(id) {
		return nil, nil, fail(StageConfig, CodeAppIDInvalid)
	}
	return &c, &Credentials{AppID: id, Key: key}, nil
}

// Validate checks c without touching the filesystem.
func (c *Config) Validate() error {
	if c.Version != 1 {
		return fail(StageConfig, CodeConfigInvalid)
	}
	// Production talks to GitHub itself and nothing else.
	if c.APIBase != github.APIBase {
		return fail(StageConfig, CodeAPIBaseRefused)
	}
	if !ident.ValidGitHubOwner(c.Owner) || !ident.ValidGitHubRepo(c.Repository) || !ident.ValidEnvName(c.GitHubAppIDEnv) {
		return fail(StageConfig, CodeConfigInvalid)
	}
	for _, p := range []string{c.LocalRepository, c.GitExecutable, c.GitHubAppPrivateKeyPath} {
		if !cleanAbs(p) {
			return fail(StageConfig, CodeConfigInvalid)
		}
	}
	return nil
}

func cleanAbs(p string) bool {
	return p != "" && len(p) <= maxPathBytes && filepath.IsAbs(p) && filepath.Clean(p) == p && bytes.IndexByte([]byte(p), 0) < 0
}

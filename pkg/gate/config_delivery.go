package gate

import (
	"crypto/rsa"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/delivery"
	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/source"
)

// Bounds of the delivery section.
const (
	maxDeliveryAttempts = 20
	maxKeyPathBytes     = 4096
)

// Duration bounds of the delivery section.
var (
	deliveryRetryBase = [2]time.Duration{100 * time.Millisecond, time.Hour}
	deliveryPoll      = [2]time.Duration{time.Second, time.Hour}
	deliveryGrace     = [2]time.Duration{time.Second, 24 * time.Hour}
	deliveryTimeout   = [2]time.Duration{time.Second, 7 * 24 * time.Hour}
)

// DeliveryConfig is gate.json's optional delivery section: Gate-owned
// automatic delivery of public-source candidates (docs/delivery.md).
type DeliveryConfig struct {
	APIBase                 string          `json:"api_base"`
	GitHubAppIDEnv          string          `json:"github_app_id_env"`
	GitHubAppPrivateKeyPath string          `json:"github_app_private_key_path"`
	MaxAttempts             int             `json:"max_attempts"`
	RetryBase               policy.Duration `json:"retry_base"`
	PollInterval            policy.Duration `json:"poll_interval"`
	NoRunsGrace             policy.Duration `json:"no_runs_grace"`
	Timeout                 policy.Duration `json:"timeout"`
}

// appCredentials are the App's identity for delivery, read at load.
type appCredentials struct {
	appID string
	key   *rsa.PrivateKey
}

func (d *DeliveryConfig) validate(ownerEnv, git string, workers []WorkerConfig) error {
	const f = "delivery."
	if git == "" {
		return cfgErr("git_executable", "required with delivery (the push runs git)")
	}
	if d.APIBase != github.APIBase {
		return cfgErr(f+"api_base", "must be %s", github.APIBase)
	}
	if !ident.ValidEnvName(d.GitHubAppIDEnv) {
		return cfgErr(f+"github_app_id_env", "must be an environment variable name")
	}
	if d.GitHubAppIDEnv == ownerEnv {
		return cfgErr(f+"github_app_id_env", "must differ from owner_token_env")
	}
	for _, w := range workers {
		if d.GitHubAppIDEnv == w.TokenEnv {
			return cfgErr(f+"github_app_id_env", "must differ from every worker token_env")
		}
	}
	if p := d.GitHubAppPrivateKeyPath; p == "" || len(p) > maxKeyPathBytes || p[0] != '/' {
		return cfgErr(f+"github_app_private_key_path", "must be an absolute path of at most %d bytes", maxKeyPathBytes)
	}
	if d.MaxAttempts < 1 || d.MaxAttempts > maxDeliveryAttempts {
		return cfgErr(f+"max_attempts", "must be 1 to %d", maxDeliveryAttempts)
	}
	for _, r := range []struct {
		name  string
		v     time.Duration
		bound [2]time.Duration
	}{
		{"retry_base", d.RetryBase.Std(), deliveryRetryBase},
		{"poll_interval", d.PollInterval.Std(), deliveryPoll},
		{"no_runs_grace", d.NoRunsGrace.Std(), deliveryGrace},
		{"timeout", d.Timeout.Std(), deliveryTimeout},
	} {
		if err := inRange(f+r.name, r.v, r.bound[0], r.bound[1]); err != nil {
			return err
		}
	}
	if d.Timeout.Std() <= d.NoRunsGrace.Std() {
		return cfgErr(f+"timeout", "must be longer than no_runs_grace")
	}
	return nil
}

// machineConfig is the delivery timing for pkg/delivery.
func (d *DeliveryConfig) machineConfig() delivery.Config {
	return delivery.Config{MaxAttempts: d.MaxAttempts, RetryBase: d.RetryBase.Std(), PollInterval: d.PollInterval.Std(),
		NoRunsGrace: d.NoRunsGrace.Std(), Timeout: d.Timeout.Std()}
}

// loadAppCredentials reads the App ID from its environment variable and
// the key from its protected file.
func (d *DeliveryConfig) loadAppCredentials(getenv func(string) string) (*appCredentials, error) {
	const f = "delivery."
	id := getenv(d.GitHubAppIDEnv)
	if id == "" {
		return nil, cfgErr(f+"github_app_id_env", "environment variable is not set or empty")
	}
	if !github.ValidAppID(id) {
		return nil, cfgErr(f+"github_app_id_env", "must hold a decimal App ID or a client ID")
	}
	key, err := github.LoadPrivateKeyFile(d.GitHubAppPrivateKeyPath)
	switch {
	case errors.Is(err, github.ErrKeyFileUnsafe):
		return nil, cfgErr(f+"github_app_private_key_path", "must be an owned regular 0600 file in an owned directory that is not group/world writable")
	case err != nil:
		return nil, cfgErr(f+"github_app_private_key_path", "must hold one unencrypted RSA private key (PEM)")
	}
	return &appCredentials{appID: id, key: key}, nil
}

// gitHubRepository names the GitHub repository jobs of r are delivered
// to: only a public-source repository (repository_url) has one.
func (r *RepositoryConfig) gitHubRepository() (owner, name string, ok bool) {
	if r.RepositoryURL == "" {
		return "", "", false
	}
	u, err := source.ParseURL(r.RepositoryURL)
	if err != nil {
		return "", "", false
	}
	return u.Owner, u.Repo, true
}

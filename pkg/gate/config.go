package gate

import (
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/configfile"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/intake"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/secretscan"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// Config bounds.
const (
	MaxConfigBytes   = 1 << 20
	MaxWorkers       = 256
	MaxRepositories  = 1024
	MaxConcurrency   = ident.MaxSlot + 1
	MaxTokenBytes    = 4096
	MinTokenBytes    = secretscan.MinSecretBytes
	MinRecoveryEvery = 10 * time.Millisecond
	MaxRecoveryEvery = time.Hour
	MinLeasePoll     = time.Millisecond
	MaxLeasePoll     = time.Hour
	maxDatabaseBytes = 4096
)

// Config is gate.json, version 1.
type Config struct {
	Version           int                `json:"version"`
	Listen            string             `json:"listen"`
	Database          string             `json:"database"`
	OwnerTokenEnv     string             `json:"owner_token_env"`
	RecoveryInterval  policy.Duration    `json:"recovery_interval"`
	LeasePollInterval policy.Duration    `json:"lease_poll_interval"`
	DefaultPool       string             `json:"default_pool"`
	Lifecycle         policy.Lifecycle   `json:"lifecycle"`
	DefaultExecution  policy.Execution   `json:"default_execution"`
	Workers           []WorkerConfig     `json:"workers"`
	Repositories      []RepositoryConfig `json:"repositories"`
	// Public sources (config_source.go): where prepared bare repositories
	// live and the git that prepares them. Both are required when a
	// repository has a repository_url.
	PublicRepositoryRoot string `json:"public_repository_root,omitempty"`
	GitExecutable        string `json:"git_executable,omitempty"`
	// CandidateBundleBytes bounds one candidate bundle a Worker uploads
	// (0: DefaultCandidateBundleBytes).
	CandidateBundleBytes int64 `json:"candidate_bundle_bytes,omitempty"`
	// CandidateUnpackedBytes bounds what a candidate's objects add up to
	// unpacked (0: source.DefaultCandidateUnpackedBytes).
	CandidateUnpackedBytes int64 `json:"candidate_unpacked_bytes,omitempty"`
	// CandidateGitMemoryBytes bounds each git an upload runs (0:
	// source.DefaultCandidateGitMemoryBytes).
	CandidateGitMemoryBytes int64 `json:"candidate_git_memory_bytes,omitempty"`
	// WorkerSourceReads bounds one Worker's base bundles in flight (0:
	// DefaultWorkerSourceReads); its candidate uploads run one at a time.
	WorkerSourceReads int `json:"worker_source_reads,omitempty"`
	// CandidateRefTTL is how long a finished job's candidate refs stay
	// in its prepared repository (0: DefaultCandidateRefTTL).
	CandidateRefTTL policy.Duration `json:"candidate_ref_ttl,omitempty"`
	// RepackPacks: a prepared repository holding more packs is repacked
	// (0: DefaultRepackPacks).
	RepackPacks int `json:"repack_packs,omitempty"`
	// Delivery, when present, turns on automatic delivery of public-source
	// candidates; nil leaves jobs candidate-only.
	Delivery *DeliveryConfig `json:"delivery,omitempty"`
	// FreeSpaceFloorBytes is the state file system's free-space floor
	// below which the Gate is in storage_full (storage.go); 0: the larger
	// of store.DefaultFloorBytes and store.DefaultFloorPercent of it.
	FreeSpaceFloorBytes int64 `json:"free_space_floor_bytes,omitempty"`
	// Replication is "off" (or absent), "async" or "sync" (DECISIONS 20):
	// with a Litestream replica the Gate leaves checkpoints to Litestream,
	// and with "sync" it acknowledges a write only after Litestream
	// confirms it reached the replica (docs/operations.md).
	Replication string `json:"replication,omitempty"`
	// ReplicationSocket is Litestream's control socket (absolute path),
	// required with replication.
	ReplicationSocket string `json:"replication_socket,omitempty"`
}

// maxSocketBytes bounds replication_socket (a UNIX socket path).
const maxSocketBytes = 107

// replication is the store's replication setting of c.
func (c *Config) replication() store.Replication {
	return store.Replication{Mode: c.Replication, Socket: c.ReplicationSocket}
}

func (c *Config) validateReplication() error {
	switch c.Replication {
	case "", store.ReplicationOff:
		if c.ReplicationSocket != "" {
			return cfgErr("replication_socket", "is only used with replication")
		}
		return nil
	case store.ReplicationAsync, store.ReplicationSync:
	default:
		return cfgErr("replication", `must be "off", "async" or "sync"`)
	}
	if _, file, err := store.StateDir(c.Database); err != nil || !file {
		return cfgErr("replication", "needs a file database")
	}
	s := c.ReplicationSocket
	if s == "" || len(s) > maxSocketBytes || !filepath.IsAbs(s) || filepath.Clean(s) != s || strings.IndexByte(s, 0) >= 0 {
		return cfgErr("replication_socket", "must be an absolute, clean path of at most %d bytes", maxSocketBytes)
	}
	return nil
}

// WorkerConfig registers one Worker: its pool, the environment variable
// holding its token, and how many lanes (connections) it may open.
type WorkerConfig struct {
	ID          string `json:"id"`
	Pool        string `json:"pool"`
	TokenEnv    string `json:"token_env"`
	Concurrency int    `json:"concurrency"`
}

// RepositoryConfig registers a repository coding jobs may name.
type RepositoryConfig struct {
	ID            string           `json:"id"`
	DefaultBranch string           `json:"default_branch"`
	WorkerPool    string           `json:"worker_pool"`
	Execution     policy.Execution `json:"execution"`
	// Budget bounds what the repository's jobs spend through the
	// Workers' model gateways (optional; resolved into each job's
	// policy at submit).
	Budget *policy.Budget `json:"budget,omitempty"`
	// RepositoryURL makes this a public-source repository the Gate clones
	// and fetches (config_source.go); empty for a static registration.
	RepositoryURL string `json:"repository_url,omitempty"`
	// Intake lets GitHub issues and comments start this repository's
	// jobs (DECISIONS 17, docs/intake.md): only a public-source
	// repository with delivery has one.
	Intake *intake.Config `json:"intake,omitempty"`
}

// ConfigError is a refused gate.json: it names the field and why, never a
// value.
type ConfigError = configfile.Error

// configFormat is gate.json's: version 1, at most MaxConfigBytes.
var configFormat = configfile.Format{Config: "gate", Version: 1, MaxBytes: MaxConfigBytes}

func cfgErr(field, format string, args ...any) error {
	return configFormat.Errorf(field, format, args...)
}

// Secrets holds digests of the tokens named by a Config, never the tokens
// themselves, and the scan set of every secret the Gate holds (the
// tokens, the App's key) that no delivered candidate may carry.
type Secrets struct {
	owner   [sha256.Size]byte
	workers [][sha256.Size]byte // by index in Config.Workers
	app     *appCredentials     // delivery's App identity, nil without delivery
	scan    *secretscan.Set
}

// LoadConfig reads gate.json from r the configfile way (bounded, version
// first, strict, Validate) and reads the tokens it names through getenv.
func LoadConfig(r io.Reader, getenv func(string) string) (*Config, *Secrets, error) {
	var c Config
	if err := configFormat.Load(r, &c); err != nil {
		return nil, nil, err
	}
	if err := c.checkSourceHost(); err != nil {
		return nil, nil, err
	}
	s, err := c.secrets(getenv)
	if err != nil {
		return nil, nil, err
	}
	if c.Delivery != nil {
		if s.app, err = c.Delivery.loadAppCredentials(getenv); err != nil {
			return nil, nil, err
		}
		// Only delivery pushes candidates: only it needs the scan set.
		if s.scan, err = c.scanSet(getenv, s.app); err != nil {
			return nil, nil, err
		}
	}
	return &c, s, nil
}

// Validate checks everything in c that does not need the environment.
func (c *Config) Validate() error {
	if c.Version != 1 {
		return cfgErr("version", "must be 1")
	}
	if err := validListen(c.Listen); err != nil {
		return err
	}
	if c.Database == "" || len(c.Database) > maxDatabaseBytes || strings.IndexByte(c.Database, 0) >= 0 {
		return cfgErr("database", "required, at most %d bytes", maxDatabaseBytes)
	}
	// The store's own DSN rules (supported forms, canonical paths), checked
	// at load so a bad value stops startup naming the field.
	if err := store.CheckDSN(c.Database); err != nil {
		var de *store.DSNError
		if errors.As(err, &de) {
			return cfgErr("database", "invalid database DSN: %s", de.Reason)
		}
		return cfgErr("database", "invalid database DSN")
	}
	if c.FreeSpaceFloorBytes != 0 && (c.FreeSpaceFloorBytes < store.MinFloorBytes || c.FreeSpaceFloorBytes > store.MaxFloorBytes) {
		return cfgErr("free_space_floor_bytes", "must be %d to %d bytes", store.MinFloorBytes, int64(store.MaxFloorBytes))
	}
	if err := c.validateReplication(); err != nil {
		return err
	}
	if !ident.ValidEnvName(c.OwnerTokenEnv) {
		return cfgErr("owner_token_env", "must be an environment variable name")
	}
	if err := inRange("recovery_interval", c.RecoveryInterval.Std(), MinRecoveryEvery, MaxRecoveryEvery); err != nil {
		return err
	}
	if err := inRange("lease_poll_interval", c.LeasePollInterval.Std(), MinLeasePoll, MaxLeasePoll); err != nil {
		return err
	}
	if !ident.ValidID(c.DefaultPool) {
		return cfgErr("default_pool", "must be a safe id")
	}
	if err := c.Lifecycle.Validate(); err != nil {
		return cfgErr("lifecycle", "%v", err)
	}
	if err := c.DefaultExecution.Validate(); err != nil {
		return cfgErr("default_execution", "%v", err)
	}
	if len(c.Workers) == 0 || len(c.Workers) > MaxWorkers {
		return cfgErr("workers", "must list 1 to %d workers", MaxWorkers)
	}
	pools := map[string]bool{}
	ids := map[string]bool{}
	for i, w := range c.Workers {
		f := "workers[" + strconv.Itoa(i) + "]"
		if !ident.ValidID(w.ID) {
			return cfgErr(f+".id", "must be a safe id")
		}
		if ids[w.ID] {
			return cfgErr(f+".id", "duplicate worker id")
		}
		ids[w.ID] = true
		if !ident.ValidID(w.Pool) {
			return cfgErr(f+".pool", "must be a safe id")
		}
		pools[w.Pool] = true
		if !ident.ValidEnvName(w.TokenEnv) {
			return cfgErr(f+".token_env", "must be an environment variable name")
		}
		if w.TokenEnv == c.OwnerTokenEnv {
			return cfgErr(f+".token_env", "must differ from owner_token_env")
		}
		if w.Concurrency < 1 || w.Concurrency > MaxConcurrency {
			return cfgErr(f+".concurrency", "must be 1 to %d", MaxConcurrency)
		}
	}
	if !pools[c.DefaultPool] {
		return cfgErr("default_pool", "no worker serves this pool")
	}
	if len(c.Repositories) > MaxRepositories {
		return cfgErr("repositories", "at most %d repositories", MaxRepositories)
	}
	repos := map[string]bool{}
	for i, r := range c.Repositories {
		f := "repositories[" + strconv.Itoa(i) + "]"
		if !ident.ValidID(r.ID) {
			return cfgErr(f+".id", "must be a safe id")
		}
		if repos[r.ID] {
			return cfgErr(f+".id", "duplicate repository id")
		}
		repos[r.ID] = true
		if !ident.ValidBranch(r.DefaultBranch) {
			return cfgErr(f+".default_branch", "must be a safe branch name")
		}
		if !ident.ValidID(r.WorkerPool) {
			return cfgErr(f+".worker_pool", "must be a safe id")
		}
		if !pools[r.WorkerPool] {
			return cfgErr(f+".worker_pool", "no worker serves this pool")
		}
		if err := r.Execution.Validate(); err != nil {
			return cfgErr(f+".execution", "%v", err)
		}
		if err := r.Budget.Validate(); err != nil {
			return cfgErr(f+".budget", "%v", err)
		}
		if err := c.validateIntake(f, &r); err != nil {
			return err
		}
	}
	if err := c.validateSources(); err != nil {
		return err
	}
	if c.Delivery != nil {
		return c.Delivery.validate(c.OwnerTokenEnv, c.GitExecutable, c.Workers)
	}
	return nil
}

// validateIntake checks repository r's intake section (field f names r):
// GitHub can start work only where the Gate delivers, so it needs the
// delivery section and a repository_url.
func (c *Config) validateIntake(f string, r *RepositoryConfig) error {
	if r.Intake == nil {
		return nil
	}
	if c.Delivery == nil {
		return cfgErr(f+".intake", "needs the delivery section")
	}
	if r.RepositoryURL == "" {
		return cfgErr(f+".intake", "needs repository_url (only public-source repositories are delivered)")
	}
	if err := r.Intake.Validate(); err != nil {
		var fe *intake.FieldError
		if errors.As(err, &fe) {
			return cfgErr(f+".intake."+fe.Field, "%s", fe.Reason)
		}
		return cfgErr(f+".intake", "invalid")
	}
	return nil
}

func inRange(field string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return cfgErr(field, "must be between %v and %v", lo, hi)
	}
	return nil
}

func validListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || len(s) > 512 {
		return cfgErr("listen", "must be host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 || strconv.Itoa(n) != port {
		return cfgErr("listen", "port must be 0 to 65535")
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':') {
			return cfgErr("listen", "host must be a name or IP address")
		}
	}
	return nil
}

// scanSet is the set of the Gate's own secrets (the tokens, already
// checked by secrets, and the App's key) delivery scans candidates for.
func (c *Config) scanSet(getenv func(string) string, app *appCredentials) (*secretscan.Set, error) {
	var b secretscan.Builder
	b.Add([]byte(getenv(c.OwnerTokenEnv)))
	for _, w := range c.Workers {
		b.Add([]byte(getenv(w.TokenEnv)))
	}
	if app != nil {
		b.AddRSAKey(app.key)
	}
	s, err := b.Set()
	if err != nil {
		return nil, cfgErr("delivery.github_app_private_key_path", "the key cannot be scanned for (too large)")
	}
	return s, nil
}

// validToken: MinTokenBytes to MaxTokenBytes of printable ASCII without
// spaces (it travels in a header, and candidates are scanned for it).
func validToken(t string) bool {
	if len(t) < MinTokenBytes || len(t) > MaxTokenBytes {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return false
		}
	}
	return true
}

// secrets reads every named token and checks it is set, header-safe and
// unique; errors name the config field, never the value.
func (c *Config) secrets(getenv func(string) string) (*Secrets, error) {
	s := &Secrets{workers: make([][sha256.Size]byte, len(c.Workers))}
	owner := getenv(c.OwnerTokenEnv)
	if owner == "" {
		return nil, cfgErr("owner_token_env", "environment variable is not set or empty")
	}
	if !validToken(owner) {
		return nil, cfgErr("owner_token_env", "token must be %d to %d printable ASCII bytes without spaces", MinTokenBytes, MaxTokenBytes)
	}
	s.owner = sha256.Sum256([]byte(owner))
	seen := map[[sha256.Size]byte]int{s.owner: -1}
	for i, w := range c.Workers {
		f := "workers[" + strconv.Itoa(i) + "].token_env"
		tok := getenv(w.TokenEnv)
		if tok == "" {
			return nil, cfgErr(f, "environment variable is not set or empty")
		}
		if !validToken(tok) {
			return nil, cfgErr(f, "token must be %d to %d printable ASCII bytes without spaces", MinTokenBytes, MaxTokenBytes)
		}
		d := sha256.Sum256([]byte(tok))
		if j, dup := seen[d]; dup {
			if j < 0 {
				return nil, cfgErr(f, "token equals the owner token")
			}
			return nil, cfgErr(f, "token equals the token of workers[%d]", j)
		}
		seen[d] = i
		s.workers[i] = d
	}
	return s, nil
}

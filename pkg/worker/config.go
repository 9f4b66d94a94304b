package worker

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/configfile"
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// ConfigVersion is the only worker.json version this Worker reads.
const ConfigVersion = 1

// Bounds this Worker puts on its configuration. They keep a config file and
// everything derived from it small; none of them comes from the spec.
const (
	MaxConfigBytes     = 1 << 20 // worker.json
	MaxConcurrency     = 256     // lanes (wire allows slots 0..255)
	MaxPlugins         = 64
	MaxRepositories    = 1024
	MaxRoots           = 64
	MaxEnvNames        = 256
	MaxArgv            = 64   // argv elements per plugin
	MaxArgBytes        = 4096 // bytes per argv element and per path
	MaxTokenBytes      = 4096 // worker token value
	MinHeartbeat       = 10 * time.Millisecond
	MaxHeartbeat       = time.Hour
	MaxCeilingDuration = 24 * time.Hour
	MaxCeilingBytes    = 1 << 30
)

// fileConfig mirrors worker.json field for field; strictjson rejects
// anything else. Optional fields are the ones whose zero value means absent.
type fileConfig struct {
	Version                   int                    `json:"version"`
	GateURL                   string                 `json:"gate_url"`
	ID                        string                 `json:"id"`
	TokenEnv                  string                 `json:"token_env"`
	HeartbeatInterval         policy.Duration        `json:"heartbeat_interval"`
	Concurrency               int                    `json:"concurrency"`
	RepositoryRoots           []string               `json:"repository_roots"`
	WorktreeRoot              string                 `json:"worktree_root"`
	RuntimeRoot               string                 `json:"runtime_root"`
	Repositories              []fileRepo             `json:"repositories"`
	Plugins                   []filePlugin           `json:"plugins"`
	EnvironmentAllowlist      []string               `json:"environment_allowlist"`
	CheckEnvironmentAllowlist []string               `json:"check_environment_allowlist"`
	Ceilings                  *fileCeilings          `json:"ceilings"`
	Sandbox                   string                 `json:"sandbox"`
	SandboxReadPaths          []string               `json:"sandbox_read_paths"`
	Providers                 []gateway.FileProvider `json:"providers"`

	parsed *Config // set by Validate
}

type fileRepo struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	Source string `json:"source"`
}

type filePlugin struct {
	ID     string   `json:"id"`
	Argv   []string `json:"argv"`
	SHA256 string   `json:"sha256"`
}

type fileCeilings struct {
	PluginTimeout     policy.Duration `json:"plugin_timeout"`
	CheckTimeout      policy.Duration `json:"check_timeout"`
	GitTimeout        policy.Duration `json:"git_timeout"`
	CleanupTimeout    policy.Duration `json:"cleanup_timeout"`
	PluginOutputBytes int64           `json:"plugin_output_bytes"`
	CheckOutputBytes  int64           `json:"check_output_bytes"`
	GitOutputBytes    int64           `json:"git_output_bytes"`
}

// Config is a validated worker.json. It holds names of secrets, never
// their values.
type Config struct {
	GateURL                   *url.URL
	ID                        string
	TokenEnv                  string
	HeartbeatInterval         time.Duration
	Concurrency               int
	RepositoryRoots           []string
	WorktreeRoot              string
	RuntimeRoot               string
	Repositories              []Repository
	Plugins                   []Plugin
	EnvironmentAllowlist      []string
	CheckEnvironmentAllowlist []string
	Ceilings                  Ceilings
	// Sandbox is SandboxLandlock (the default), SandboxUnscoped or
	// SandboxNone.
	Sandbox string
	// SandboxReadPaths are the operator's extra read-only paths inside
	// the sandbox (sandbox.go).
	SandboxReadPaths []string
	// Providers are the model providers the gateway serves (names of
	// the keys' variables, never the keys; gateway.go).
	Providers []gateway.Provider
	// ConfigPath is the file this config was read from, when the caller
	// sets it (forge-worker does): it is kept out of the sandbox even when
	// it lies in a directory the sandbox reads.
	ConfigPath string
}

// The sandbox modes of worker.json's "sandbox".
const (
	SandboxLandlock = sandbox.ModeLandlock
	SandboxUnscoped = sandbox.ModeUnscoped
	SandboxNone     = sandbox.ModeNone
)

// Repository is a repository registration: a static one has a local
// Path; a Gate one (worker.json "source":"gate", no path) is a
// public-source repository whose bases this Worker fetches from the Gate
// into its own cache (coding_cache.go).
type Repository struct {
	ID   string
	Path string
	Gate bool
}

// SourceGate is the worker.json "source" of a Gate registration.
const SourceGate = "gate"

// Plugin is a configured plugin executable. SHA256 is empty or 64
// lowercase hex digits that the executable must match before each run.
type Plugin struct {
	ID     string
	Argv   []string
	SHA256 string
}

// Ceilings are the local upper bounds on every limit a Gate policy sets.
type Ceilings struct {
	PluginTimeout     time.Duration
	CheckTimeout      time.Duration
	GitTimeout        time.Duration
	CleanupTimeout    time.Duration
	PluginOutputBytes int64
	CheckOutputBytes  int64
	GitOutputBytes    int64
}

// ConfigError is a refused worker.json. Field is a JSON-path-like name
// ("plugins[1].id"); Reason is fixed text. Neither contains a value from the
// file or the environment.
type ConfigError = configfile.Error

// configFormat is worker.json's: version ConfigVersion, at most
// MaxConfigBytes.
var configFormat = configfile.Format{Config: "worker", Version: ConfigVersion, MaxBytes: MaxConfigBytes}

func fieldErr(field, reason string) error { return configFormat.Errorf(field, "%s", reason) }

// LoadConfig reads worker.json from r the configfile way (bounded, version
// first, strict, Validate). It checks shape only; CheckHost checks the
// environment and the filesystem.
func LoadConfig(r io.Reader) (*Config, error) {
	var fc fileConfig
	if err := configFormat.Load(r, &fc); err != nil {
		return nil, err
	}
	return fc.parsed, nil
}

// ParseConfig is LoadConfig for a file already in memory.
func ParseConfig(data []byte) (*Config, error) { return LoadConfig(bytes.NewReader(data)) }

// Validate checks the decoded file and, when it is valid, records the
// Config it describes.
func (fc *fileConfig) Validate() error {
	if fc.Version != ConfigVersion {
		return fieldErr("version", "must be 1")
	}
	c := &Config{}
	var err error
	if c.GateURL, err = parseGateURL(fc.GateURL); err != nil {
		return err
	}
	if !ident.ValidID(fc.ID) {
		return fieldErr("id", "missing or not a safe id")
	}
	c.ID = fc.ID
	if !ident.ValidEnvName(fc.TokenEnv) {
		return fieldErr("token_env", "missing or not an environment variable name")
	}
	c.TokenEnv = fc.TokenEnv
	if c.HeartbeatInterval, err = checkDuration("heartbeat_interval", fc.HeartbeatInterval, MinHeartbeat, MaxHeartbeat); err != nil {
		return err
	}
	if fc.Concurrency < 1 || fc.Concurrency > MaxConcurrency {
		return fieldErr("concurrency", fmt.Sprintf("must be 1..%d", MaxConcurrency))
	}
	c.Concurrency = fc.Concurrency
	if err := parseLayout(c, fc); err != nil {
		return err
	}
	if err := parsePlugins(c, fc.Plugins); err != nil {
		return err
	}
	if c.EnvironmentAllowlist, err = parseEnvList("environment_allowlist", fc.EnvironmentAllowlist); err != nil {
		return err
	}
	if c.CheckEnvironmentAllowlist, err = parseEnvList("check_environment_allowlist", fc.CheckEnvironmentAllowlist); err != nil {
		return err
	}
	for i, name := range c.CheckEnvironmentAllowlist {
		if !slices.Contains(c.EnvironmentAllowlist, name) {
			return fieldErr(fmt.Sprintf("check_environment_allowlist[%d]", i), "not in environment_allowlist")
		}
	}
	if fc.Ceilings == nil {
		return fieldErr("ceilings", "missing")
	}
	if c.Ceilings, err = parseCeilings(fc.Ceilings); err != nil {
		return err
	}
	if err := parseSandbox(c, fc); err != nil {
		return err
	}
	if err := parseProviders(c, fc.Providers); err != nil {
		return err
	}
	fc.parsed = c
	return nil
}

func parseGateURL(s string) (*url.URL, error) {
	const field = "gate_url"
	if s == "" {
		return nil, fieldErr(field, "missing")
	}
	if len(s) > MaxArgBytes || strings.ContainsAny(s, " \t\r\n\\") {
		return nil, fieldErr(field, "not a ws:// or wss:// origin")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" || u.Hostname() == "" ||
		u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") ||
		(u.Path != "" && u.Path != "/") || u.RawPath != "" {
		return nil, fieldErr(field, "not a ws:// or wss:// origin")
	}
	u.Path = ""
	return u, nil
}

func parseLayout(c *Config, fc *fileConfig) error {
	if len(fc.RepositoryRoots) > MaxRoots {
		return fieldErr("repository_roots", "too many entries")
	}
	for i, root := range fc.RepositoryRoots {
		field := fmt.Sprintf("repository_roots[%d]", i)
		if !canonicalAbs(root) || root == "/" {
			return fieldErr(field, "not a canonical absolute path")
		}
		for j, prev := range c.RepositoryRoots {
			if prev == root {
				return fieldErr(field, fmt.Sprintf("duplicates repository_roots[%d]", j))
			}
			if within(root, prev) || within(prev, root) {
				return fieldErr(field, fmt.Sprintf("overlaps repository_roots[%d]", j))
			}
		}
		c.RepositoryRoots = append(c.RepositoryRoots, root)
	}
	for _, p := range []struct {
		field string
		src   string
		dst   *string
	}{{"worktree_root", fc.WorktreeRoot, &c.WorktreeRoot}, {"runtime_root", fc.RuntimeRoot, &c.RuntimeRoot}} {
		if p.src == "" {
			return fieldErr(p.field, "missing")
		}
		if !canonicalAbs(p.src) || p.src == "/" {
			return fieldErr(p.field, "not a canonical absolute path")
		}
		for j, root := range c.RepositoryRoots {
			if within(p.src, root) || within(root, p.src) {
				return fieldErr(p.field, fmt.Sprintf("overlaps repository_roots[%d]", j))
			}
		}
		*p.dst = p.src
	}
	if within(c.WorktreeRoot, c.RuntimeRoot) || within(c.RuntimeRoot, c.WorktreeRoot) {
		return fieldErr("runtime_root", "overlaps worktree_root")
	}
	if len(fc.Repositories) > MaxRepositories {
		return fieldErr("repositories", "too many entries")
	}
	for i, r := range fc.Repositories {
		field := fmt.Sprintf("repositories[%d]", i)
		if !ident.ValidID(r.ID) {
			return fieldErr(field+".id", "missing or not a safe id")
		}
		if r.Source != "" {
			if r.Source != SourceGate {
				return fieldErr(field+".source", `must be "gate" when present`)
			}
			if r.Path != "" {
				return fieldErr(field+".path", "not allowed with source")
			}
			for j, prev := range c.Repositories {
				if prev.ID == r.ID {
					return fieldErr(field+".id", fmt.Sprintf("duplicates repositories[%d]", j))
				}
			}
			c.Repositories = append(c.Repositories, Repository{ID: r.ID, Gate: true})
			continue
		}
		if !canonicalAbs(r.Path) {
			return fieldErr(field+".path", "not a canonical absolute path")
		}
		inside := false
		for _, root := range c.RepositoryRoots {
			if within(r.Path, root) && r.Path != root {
				inside = true
			}
		}
		if !inside {
			return fieldErr(field+".path", "not inside any repository_roots entry")
		}
		for j, prev := range c.Repositories {
			if prev.ID == r.ID {
				return fieldErr(field+".id", fmt.Sprintf("duplicates repositories[%d]", j))
			}
			if !prev.Gate && prev.Path == r.Path {
				return fieldErr(field+".path", fmt.Sprintf("duplicates repositories[%d]", j))
			}
		}
		c.Repositories = append(c.Repositories, Repository{ID: r.ID, Path: r.Path})
	}
	return nil
}

func parsePlugins(c *Config, plugins []filePlugin) error {
	if len(plugins) == 0 {
		return fieldErr("plugins", "at least one plugin is required")
	}
	if len(plugins) > MaxPlugins {
		return fieldErr("plugins", "too many entries")
	}
	for i, p := range plugins {
		field := fmt.Sprintf("plugins[%d]", i)
		if !ident.ValidID(p.ID) {
			return fieldErr(field+".id", "missing or not a safe id")
		}
		for j, prev := range c.Plugins {
			if prev.ID == p.ID {
				return fieldErr(field+".id", fmt.Sprintf("duplicates plugins[%d]", j))
			}
		}
		if len(p.Argv) == 0 || len(p.Argv) > MaxArgv {
			return fieldErr(field+".argv", fmt.Sprintf("must have 1..%d elements", MaxArgv))
		}
		for k, a := range p.Argv {
			if a == "" || len(a) > MaxArgBytes || strings.ContainsRune(a, 0) {
				return fieldErr(fmt.Sprintf("%s.argv[%d]", field, k), "empty, too long or contains NUL")
			}
		}
		if !canonicalAbs(p.Argv[0]) {
			return fieldErr(field+".argv[0]", "not a canonical absolute path")
		}
		if p.SHA256 != "" && !ident.ValidSHA256(p.SHA256) {
			return fieldErr(field+".sha256", "must be 64 lowercase hex digits")
		}
		c.Plugins = append(c.Plugins, Plugin{ID: p.ID, Argv: slices.Clone(p.Argv), SHA256: p.SHA256})
	}
	return nil
}

func parseEnvList(field string, names []string) ([]string, error) {
	if len(names) > MaxEnvNames {
		return nil, fieldErr(field, "too many entries")
	}
	var out []string
	for i, n := range names {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !ident.ValidEnvName(n) {
			return nil, fieldErr(f, "not an environment variable name")
		}
		if j := slices.Index(out, n); j >= 0 {
			return nil, fieldErr(f, fmt.Sprintf("duplicates %s[%d]", field, j))
		}
		out = append(out, n)
	}
	return out, nil
}

func parseCeilings(fc *fileCeilings) (Ceilings, error) {
	var c Ceilings
	var err error
	for _, d := range []struct {
		field string
		src   policy.Duration
		dst   *time.Duration
	}{
		{"ceilings.plugin_timeout", fc.PluginTimeout, &c.PluginTimeout},
		{"ceilings.check_timeout", fc.CheckTimeout, &c.CheckTimeout},
		{"ceilings.git_timeout", fc.GitTimeout, &c.GitTimeout},
		{"ceilings.cleanup_timeout", fc.CleanupTimeout, &c.CleanupTimeout},
	} {
		if *d.dst, err = checkDuration(d.field, d.src, time.Millisecond, MaxCeilingDuration); err != nil {
			return Ceilings{}, err
		}
	}
	for _, b := range []struct {
		field string
		v     int64
		dst   *int64
	}{
		{"ceilings.plugin_output_bytes", fc.PluginOutputBytes, &c.PluginOutputBytes},
		{"ceilings.check_output_bytes", fc.CheckOutputBytes, &c.CheckOutputBytes},
		{"ceilings.git_output_bytes", fc.GitOutputBytes, &c.GitOutputBytes},
	} {
		if b.v < 1 || b.v > MaxCeilingBytes {
			return Ceilings{}, fieldErr(b.field, fmt.Sprintf("must be 1..%d", MaxCeilingBytes))
		}
		*b.dst = b.v
	}
	return c, nil
}

// checkDuration returns d when it lies in lo..hi; a missing duration is
// zero and so out of range.
func checkDuration(field string, d policy.Duration, lo, hi time.Duration) (time.Duration, error) {
	if d.Std() < lo || d.Std() > hi {
		return 0, fieldErr(field, fmt.Sprintf("must be between %v and %v", lo, hi))
	}
	return d.Std(), nil
}

// canonicalAbs reports whether p is absolute and already in Clean form
// (no "." or ".." segments, no doubled or trailing slashes).
func canonicalAbs(p string) bool {
	return p != "" && len(p) <= MaxArgBytes && !strings.ContainsRune(p, 0) &&
		filepath.IsAbs(p) && filepath.Clean(p) == p
}

// within reports whether p equals dir or lies below it; both are clean.
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

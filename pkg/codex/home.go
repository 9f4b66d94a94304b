package codex

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Names inside the private Codex home.
const (
	HomeDir    = "codex-home" // the private CODEX_HOME, inside the run directory
	ConfigFile = "config.toml"
	AuthFile   = "auth.json"
)

// MaxAuthBytes bounds the authentication file copied into a run.
const MaxAuthBytes = 1 << 20

// ProviderID is the key of the operator's provider in Codex's
// model_providers table (not one of Codex's built-in provider ids).
const ProviderID = "forge"

// disabledFeatures are the codex-cli 0.169.0 features that reach the
// network on their own (plugin marketplace sync from github.com and
// chatgpt.com, remote plugins, connectors, tool suggestions, skill
// dependency installs, update checks, browser and computer use, image
// generation). Codex rejects an unknown feature name under --strict-config,
// so a renamed feature fails the run instead of silently staying on.
var disabledFeatures = []string{
	"apps",
	"browser_use",
	"computer_use",
	"image_generation",
	"in_app_updates",
	"plugins",
	"remote_plugin",
	"skill_mcp_dependency_install",
	"tool_suggest",
}

// ConfigTOML returns the config.toml written into every run's private
// CODEX_HOME: the profile's model, reasoning effort and provider, and
// everything else that reaches the network on its own switched off
// (analytics, feedback, update checks, web search, the features above).
// Values are validated by ParseProfile and quoted as TOML basic strings.
func ConfigTOML(p Profile) []byte {
	var b strings.Builder
	b.WriteString("# Written by forge-codex-plugin for one run from the operator profile.\n")
	if p.Model != "" {
		fmt.Fprintf(&b, "model = %s\n", tomlString(p.Model))
	}
	if p.ReasoningEffort != "" {
		fmt.Fprintf(&b, "model_reasoning_effort = %s\n", tomlString(p.ReasoningEffort))
	}
	if p.Provider != nil {
		fmt.Fprintf(&b, "model_provider = %s\n", tomlString(ProviderID))
	}
	b.WriteString("check_for_update_on_startup = false\n")
	b.WriteString("web_search = \"disabled\"\n")
	b.WriteString("\n[analytics]\nenabled = false\n")
	b.WriteString("\n[feedback]\nenabled = false\n")
	b.WriteString("\n[features]\n")
	for _, f := range disabledFeatures {
		fmt.Fprintf(&b, "%s = false\n", f)
	}
	if pr := p.Provider; pr != nil {
		fmt.Fprintf(&b, "\n[model_providers.%s]\n", ProviderID)
		fmt.Fprintf(&b, "name = %s\n", tomlString(pr.Name))
		fmt.Fprintf(&b, "base_url = %s\n", tomlString(pr.BaseURL))
		fmt.Fprintf(&b, "wire_api = %s\n", tomlString(pr.WireAPI))
		if pr.EnvKey != "" {
			fmt.Fprintf(&b, "env_key = %s\n", tomlString(pr.EnvKey))
		}
		b.WriteString("supports_websockets = false\n")
	}
	return []byte(b.String())
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// makeHome creates the private CODEX_HOME (0700) under runDir, writes the
// configuration and copies the authentication file from authSource (the
// operator's CODEX_HOME) read-only, when it has one. Nothing is written to
// authSource. It returns the home's path.
func makeHome(runDir, authSource string, p Profile) (string, error) {
	home := filepath.Join(runDir, HomeDir)
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(home, ConfigFile), ConfigTOML(p), 0o400); err != nil {
		return "", err
	}
	if authSource == "" {
		return home, nil
	}
	if !filepath.IsAbs(authSource) {
		return "", errAuth
	}
	auth, err := readAuth(filepath.Join(authSource, AuthFile))
	if err != nil || auth == nil {
		return home, err
	}
	if err := os.WriteFile(filepath.Join(home, AuthFile), auth, 0o400); err != nil {
		return "", err
	}
	return home, nil
}

// errAuth is returned when the operator's authentication file exists but
// cannot be used.
var errAuth = &Error{Reason: ReasonAuth}

// readAuth returns the authentication file's content, nil when there is
// none, or errAuth when it is not a readable regular file of at most
// MaxAuthBytes.
func readAuth(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errAuth
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errAuth
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxAuthBytes+1))
	if err != nil || len(data) > MaxAuthBytes {
		return nil, errAuth
	}
	return data, nil
}

// removeAll removes the run directory even where Codex (or a tool it ran)
// left directories without write permission.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// withEnv returns env with key set to value (every earlier binding of key
// removed).
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

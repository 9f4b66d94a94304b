package codex

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
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
// (analytics, feedback, update checks, web search, the features above),
// and a shell environment policy that keeps the provider key out of the
// commands Codex runs.
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
	// The commands Codex runs inherit its environment minus the provider
	// key (and, by Codex's default excludes, every *KEY*, *SECRET* and
	// *TOKEN* name): the key reaches the model client only.
	b.WriteString("\n[shell_environment_policy]\n")
	b.WriteString("inherit = \"all\"\n")
	b.WriteString("ignore_default_excludes = false\n")
	b.WriteString("exclude = [")
	if p.Provider != nil && p.Provider.EnvKey != "" {
		b.WriteString(tomlString(p.Provider.EnvKey))
	}
	b.WriteString("]\n")
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

// homeFiles returns the private CODEX_HOME's seed: the generated
// configuration and, when the operator's CODEX_HOME (authSource) has one,
// its auth.json (read, never written). An unusable authentication file or
// a relative authSource fails with ReasonAuth.
func homeFiles(authSource string, p Profile) (map[string][]byte, error) {
	files := map[string][]byte{ConfigFile: ConfigTOML(p)}
	if authSource == "" {
		return files, nil
	}
	if !filepath.IsAbs(authSource) {
		return nil, errAuth()
	}
	auth, err := agent.ReadOperatorFile(filepath.Join(authSource, AuthFile), MaxAuthBytes)
	if err != nil {
		return nil, errAuth()
	}
	if auth != nil {
		files[AuthFile] = auth
	}
	return files, nil
}

// ReasonAuth: the operator's Codex authentication file cannot be used.
const ReasonAuth agent.Reason = "codex authentication source is not an absolute directory with a readable auth.json of at most 1 MiB"

func errAuth() error {
	return &agent.Error{Agent: Name, Reason: ReasonAuth, Class: agent.ClassMisconfigured}
}

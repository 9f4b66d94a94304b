package codex

import (
	"fmt"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Names inside the private Codex home.
const (
	HomeDir    = "codex-home" // the private CODEX_HOME, inside the run directory
	ConfigFile = "config.toml"
)

// ProviderID is the key of the gateway's provider in Codex's
// model_providers table (not one of Codex's built-in provider ids).
const ProviderID = "forge"

// KeyEnv is the variable Codex reads its only key from: the attempt's
// gateway credential, which the Worker hands the plugin under this name.
const KeyEnv = plugin.EnvGatewayToken

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
// CODEX_HOME: the profile's model and reasoning effort, the gateway's
// provider (its base URL for the chosen worker.json provider, the
// credential's variable as env_key), everything else that reaches the
// network on its own switched off (analytics, feedback, update checks,
// web search, the features above), and a shell environment policy that
// keeps the credential out of the commands Codex runs. Values are
// validated by ParseProfile and SelectGateway and quoted as TOML basic
// strings.
func ConfigTOML(p Profile, gw agent.Gateway) []byte {
	var b strings.Builder
	b.WriteString("# Written by forge-codex-plugin for one run from the operator profile.\n")
	if p.Model != "" {
		fmt.Fprintf(&b, "model = %s\n", tomlString(p.Model))
	}
	if p.ReasoningEffort != "" {
		fmt.Fprintf(&b, "model_reasoning_effort = %s\n", tomlString(p.ReasoningEffort))
	}
	fmt.Fprintf(&b, "model_provider = %s\n", tomlString(ProviderID))
	b.WriteString("check_for_update_on_startup = false\n")
	b.WriteString("web_search = \"disabled\"\n")
	b.WriteString("\n[analytics]\nenabled = false\n")
	b.WriteString("\n[feedback]\nenabled = false\n")
	// The commands Codex runs inherit its environment minus the
	// credential (and, by Codex's default excludes, every *KEY*, *SECRET*
	// and *TOKEN* name): it reaches the model client only.
	b.WriteString("\n[shell_environment_policy]\n")
	b.WriteString("inherit = \"all\"\n")
	b.WriteString("ignore_default_excludes = false\n")
	fmt.Fprintf(&b, "exclude = [%s]\n", tomlString(KeyEnv))
	b.WriteString("\n[features]\n")
	for _, f := range disabledFeatures {
		fmt.Fprintf(&b, "%s = false\n", f)
	}
	fmt.Fprintf(&b, "\n[model_providers.%s]\n", ProviderID)
	fmt.Fprintf(&b, "name = %s\n", tomlString(gw.Provider))
	fmt.Fprintf(&b, "base_url = %s\n", tomlString(gw.BaseURL))
	b.WriteString("wire_api = \"responses\"\n")
	fmt.Fprintf(&b, "env_key = %s\n", tomlString(KeyEnv))
	b.WriteString("supports_websockets = false\n")
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

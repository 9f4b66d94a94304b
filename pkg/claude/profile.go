package claude

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// Profile is the operator's choice of model, effort, key variable and
// gateway for every run (see ParseProfile). The zero value keeps Claude
// Code's default model and effort, reads the key from ANTHROPIC_API_KEY
// and talks to api.anthropic.com.
type Profile struct {
	Model   string
	Effort  string
	KeyEnv  string // name of the variable holding the API key; "" = DefaultKeyEnv
	BaseURL string // "" = Anthropic's API
}

// DefaultKeyEnv is the key variable when the profile names none.
const DefaultKeyEnv = "ANTHROPIC_API_KEY"

// Efforts are the accepted effort values (claude --effort, 2.1.328).
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// reservedEnvKeys are variables the run sets up itself; none can hold the
// key.
var reservedEnvKeys = []string{"PATH", "HOME", "TMPDIR", "CLAUDE_CONFIG_DIR", "CLAUDE_BIN", "ANTHROPIC_BASE_URL"}

func profileErr(reason string) error { return agent.ProfileErr(Name, reason) }

// profileFile is the strict shape of the file.
type profileFile struct {
	Version *int    `json:"version"`
	Model   *string `json:"model"`
	Effort  *string `json:"effort"`
	KeyEnv  *string `json:"api_key_env"`
	BaseURL *string `json:"base_url"`
}

// LoadProfile reads and checks the operator profile at path: a regular
// file of at most 16 KiB.
func LoadProfile(path string) (Profile, error) {
	var pf profileFile
	if err := agent.LoadProfile(Name, path, &pf); err != nil {
		return Profile{}, err
	}
	return checkProfile(&pf)
}

// ParseProfile checks one profile document:
//
//	{"version":1,"model":"claude-opus-4-6","effort":"high",
//	 "api_key_env":"CORP_ANTHROPIC_KEY","base_url":"https://llm.example.com"}
//
// version is required and must be 1; every other member is optional, no
// other member is accepted (strictjson rules: unique keys, no null). model
// is 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with "-"; effort is
// one of Efforts; api_key_env is a portable environment variable name
// other than PATH, HOME, TMPDIR, CLAUDE_CONFIG_DIR, CLAUDE_BIN and
// ANTHROPIC_BASE_URL; base_url is an absolute URL without user
// information, query or fragment, at most 2048 bytes, https (http only to
// a loopback host). Claude Code posts to BASE/v1/messages.
func ParseProfile(data []byte) (Profile, error) {
	var pf profileFile
	if err := agent.DecodeProfile(Name, data, &pf); err != nil {
		return Profile{}, err
	}
	return checkProfile(&pf)
}

func checkProfile(pf *profileFile) (Profile, error) {
	if err := agent.CheckVersion(Name, pf.Version); err != nil {
		return Profile{}, err
	}
	var p Profile
	if pf.Model != nil {
		if !agent.ValidModel(*pf.Model) {
			return Profile{}, profileErr("model " + agent.ModelRule)
		}
		p.Model = *pf.Model
	}
	if pf.Effort != nil {
		if !agent.OneOf(*pf.Effort, Efforts) {
			return Profile{}, profileErr("effort must be one of " + strings.Join(Efforts, ", "))
		}
		p.Effort = *pf.Effort
	}
	if pf.KeyEnv != nil {
		if !agent.ValidKeyVar(*pf.KeyEnv, reservedEnvKeys) {
			return Profile{}, profileErr("api_key_env must be a portable environment variable name, not one the run sets up itself")
		}
		p.KeyEnv = *pf.KeyEnv
	}
	if pf.BaseURL != nil {
		if reason := agent.CheckBaseURL(*pf.BaseURL); reason != "" {
			return Profile{}, profileErr("base_url " + reason)
		}
		p.BaseURL = *pf.BaseURL
	}
	return p, nil
}

// keyEnv is the variable the run reads the key from.
func (p Profile) keyEnv() string {
	if p.KeyEnv == "" {
		return DefaultKeyEnv
	}
	return p.KeyEnv
}

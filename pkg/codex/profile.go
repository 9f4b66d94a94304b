package codex

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// Profile is the operator's choice of model and provider for every run
// (see LoadProfile for the file). The zero value keeps Codex's defaults:
// its own model and the OpenAI provider with the CODEX_HOME
// authentication.
type Profile struct {
	Model           string
	ReasoningEffort string
	Provider        *Provider // nil: Codex's built-in OpenAI provider
}

// Provider is one model provider reached over the Responses API.
type Provider struct {
	Name    string // display name
	BaseURL string // absolute http(s) URL; Codex appends /responses
	WireAPI string // "responses" (the only wire API codex-cli 0.169.0 speaks)
	EnvKey  string // name of the environment variable holding the API key; "" for none
}

// Profile limits and values.
const (
	MaxProfileBytes  = agent.MaxProfileBytes
	ProfileVersion   = agent.ProfileVersion
	wireAPIResponses = "responses"
)

// ReasoningEfforts are the accepted reasoning_effort values.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// reservedEnvKeys are variables that carry the run's own setup and can
// never be a provider key.
var reservedEnvKeys = []string{"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "CODEX_HOME", "CODEX_BIN"}

func profileErr(reason string) error { return agent.ProfileErr(Name, reason) }

// profileFile is the strict shape of the file. Pointers tell a missing
// field from an empty one.
type profileFile struct {
	Version         *int          `json:"version"`
	Model           *string       `json:"model"`
	ReasoningEffort *string       `json:"reasoning_effort"`
	Provider        *providerFile `json:"provider"`
}

type providerFile struct {
	Name    *string `json:"name"`
	BaseURL *string `json:"base_url"`
	WireAPI *string `json:"wire_api"`
	EnvKey  *string `json:"env_key"`
}

// LoadProfile reads and checks the operator profile at path: a regular
// file of at most MaxProfileBytes.
func LoadProfile(path string) (Profile, error) {
	var pf profileFile
	if err := agent.LoadProfile(Name, path, &pf); err != nil {
		return Profile{}, err
	}
	return checkProfile(&pf)
}

// ParseProfile checks one profile document:
//
//	{"version":1,"model":"gpt-5.5","reasoning_effort":"high",
//	 "provider":{"name":"Gateway","base_url":"https://llm.example.com/v1",
//	             "wire_api":"responses","env_key":"LLM_API_KEY"}}
//
// version is required and must be 1; every other member is optional, no
// other member is accepted (strictjson rules: unique keys, no null). model
// is 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with "-";
// reasoning_effort is one of ReasoningEfforts. A provider needs name (1 to
// 64 bytes of [A-Za-z0-9 ._-]), base_url (an absolute URL without user
// information, query or fragment, at most 2048 bytes; https, or http only
// to a loopback host) and wire_api "responses"; env_key, when present, is
// a portable environment variable name other than PATH, HOME, TMPDIR,
// XDG_CACHE_HOME, CODEX_HOME and CODEX_BIN.
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
	if pf.ReasoningEffort != nil {
		if !agent.OneOf(*pf.ReasoningEffort, ReasoningEfforts) {
			return Profile{}, profileErr("reasoning_effort must be one of " + strings.Join(ReasoningEfforts, ", "))
		}
		p.ReasoningEffort = *pf.ReasoningEffort
	}
	if pf.Provider != nil {
		prov, err := checkProvider(pf.Provider)
		if err != nil {
			return Profile{}, err
		}
		p.Provider = prov
	}
	return p, nil
}

func checkProvider(pf *providerFile) (*Provider, error) {
	if pf.Name == nil || !agent.ValidName(*pf.Name) {
		return nil, profileErr("provider.name must be 1 to 64 bytes of [A-Za-z0-9 ._-]")
	}
	if pf.BaseURL == nil {
		return nil, profileErr("provider.base_url is required")
	}
	if reason := agent.CheckBaseURL(*pf.BaseURL); reason != "" {
		return nil, profileErr("provider.base_url " + reason)
	}
	if pf.WireAPI == nil || *pf.WireAPI != wireAPIResponses {
		return nil, profileErr(`provider.wire_api must be "responses"`)
	}
	prov := &Provider{Name: *pf.Name, BaseURL: *pf.BaseURL, WireAPI: *pf.WireAPI}
	if pf.EnvKey != nil {
		if !agent.ValidKeyVar(*pf.EnvKey, reservedEnvKeys) {
			return nil, profileErr("provider.env_key must be a portable environment variable name, not one the run sets up itself")
		}
		prov.EnvKey = *pf.EnvKey
	}
	return prov, nil
}

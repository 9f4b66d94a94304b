package claude

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// Profile is the operator's choice of model, effort and provider for every
// run (see ParseProfile). The zero value keeps Claude Code's default model
// and effort and takes the Worker's only anthropic-messages provider.
type Profile struct {
	Model  string
	Effort string
	// Provider is the id of the worker.json provider Claude Code talks to
	// through the Worker's gateway; "" means the only provider of kind
	// anthropic-messages.
	Provider string
}

// Efforts are the accepted effort values (claude --effort, 2.1.328).
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// ReasonOldProfile is the refusal of a profile written for the plugin
// before the gateway: api_key_env and base_url named the key's variable
// and the upstream, which now belong to the Worker.
const ReasonOldProfile = `api_key_env and base_url are no longer profile members: declare the provider in worker.json's "providers" ` +
	`(kind "anthropic-messages", base_url, and the key's variable as key_env), remove the key's variable from both environment allowlists, ` +
	`and write "provider":"ID" (or leave it out when the Worker has one anthropic-messages provider)`

func profileErr(reason string) error { return agent.ProfileErr(Name, reason) }

// profileFile is the strict shape of the file. api_key_env and base_url
// are read only to refuse them with what to write instead.
type profileFile struct {
	Version  *int    `json:"version"`
	Model    *string `json:"model"`
	Effort   *string `json:"effort"`
	Provider *string `json:"provider"`
	KeyEnv   *string `json:"api_key_env"`
	BaseURL  *string `json:"base_url"`
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
//	{"version":1,"model":"claude-opus-4-6","effort":"high","provider":"anthropic"}
//
// version is required and must be 1; every other member is optional, no
// other member is accepted (strictjson rules: unique keys, no null). model
// is 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with "-"; effort is
// one of Efforts; provider is the id of a worker.json provider of kind
// anthropic-messages (agent.ValidProviderID). The members of the profile
// before the gateway, api_key_env and base_url, are refused with
// ReasonOldProfile.
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
	if pf.KeyEnv != nil || pf.BaseURL != nil {
		return Profile{}, profileErr(ReasonOldProfile)
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
	if pf.Provider != nil {
		if !agent.ValidProviderID(*pf.Provider) {
			return Profile{}, profileErr("provider " + agent.ProviderRule)
		}
		p.Provider = *pf.Provider
	}
	return p, nil
}

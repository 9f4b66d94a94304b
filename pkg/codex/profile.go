package codex

import (
	"encoding/json"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/agent"
)

// Profile is the operator's choice of model and provider for every run
// (see ParseProfile for the file). The zero value keeps Codex's default
// model and takes the Worker's only openai-responses provider.
type Profile struct {
	Model           string
	ReasoningEffort string
	// Provider is the id of the worker.json provider Codex talks to
	// through the Worker's gateway; "" means the only provider of kind
	// openai-responses.
	Provider string
}

// Profile limits and values.
const (
	MaxProfileBytes = agent.MaxProfileBytes
	ProfileVersion  = agent.ProfileVersion
)

// ReasoningEfforts are the accepted reasoning_effort values.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// ReasonOldProvider is the refusal of a profile written for the plugin
// before the gateway: its provider object named an upstream and a key
// variable, which now belong to the Worker.
const ReasonOldProvider = `provider is now the id of a provider in worker.json's "providers" (a string), not an object: ` +
	`move its base_url there and its env_key there as key_env (kind "openai-responses"), remove the key's variable from both environment allowlists, ` +
	`and write "provider":"ID" (or leave it out when the Worker has one openai-responses provider)`

func profileErr(reason string) error { return agent.ProfileErr(Name, reason) }

// profileFile is the strict shape of the file. Pointers tell a missing
// field from an empty one; provider is read raw so that an old provider
// object is refused with what to write instead.
type profileFile struct {
	Version         *int            `json:"version"`
	Model           *string         `json:"model"`
	ReasoningEffort *string         `json:"reasoning_effort"`
	Provider        json.RawMessage `json:"provider"`
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
//	{"version":1,"model":"gpt-5.5","reasoning_effort":"high","provider":"openai"}
//
// version is required and must be 1; every other member is optional, no
// other member is accepted (strictjson rules: unique keys, no null). model
// is 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with "-";
// reasoning_effort is one of ReasoningEfforts; provider is the id of a
// worker.json provider of kind openai-responses (agent.ValidProviderID).
// A provider object (the profile before the gateway, with base_url and
// env_key) is refused with ReasonOldProvider.
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
		if pf.Provider[0] == '{' {
			return Profile{}, profileErr(ReasonOldProvider)
		}
		var id string
		if json.Unmarshal(pf.Provider, &id) != nil || !agent.ValidProviderID(id) {
			return Profile{}, profileErr("provider " + agent.ProviderRule)
		}
		p.Provider = id
	}
	return p, nil
}

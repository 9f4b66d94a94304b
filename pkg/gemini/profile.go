package gemini

import "github.com/0k-lab/agent-forge/pkg/agent"

// Profile is the operator's choice of model and provider for every run
// (see ParseProfile). The zero value keeps Gemini CLI's default model and
// takes the Worker's only gemini-generate-content provider.
type Profile struct {
	Model string
	// Provider is the id of the worker.json provider Gemini CLI talks to
	// through the Worker's gateway; "" means the only provider of kind
	// gemini-generate-content.
	Provider string
}

func profileErr(reason string) error { return agent.ProfileErr(Name, reason) }

// profileFile is the strict shape of the file.
type profileFile struct {
	Version  *int    `json:"version"`
	Model    *string `json:"model"`
	Provider *string `json:"provider"`
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
//	{"version":1,"model":"gemini-2.5-pro","provider":"gemini"}
//
// version is required and must be 1; every other member is optional, no
// other member is accepted (strictjson rules: unique keys, no null). model
// is 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with "-"; provider
// is the id of a worker.json provider of kind gemini-generate-content
// (agent.ValidProviderID).
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
	if pf.Provider != nil {
		if !agent.ValidProviderID(*pf.Provider) {
			return Profile{}, profileErr("provider " + agent.ProviderRule)
		}
		p.Provider = *pf.Provider
	}
	return p, nil
}

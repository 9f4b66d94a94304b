package codex

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
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

// Profile file limits.
const (
	MaxProfileBytes  = 16 << 10
	maxModelBytes    = 128
	maxNameBytes     = 64
	maxBaseURLBytes  = 2048
	ProfileVersion   = 1
	wireAPIResponses = "responses"
)

// ReasoningEfforts are the accepted reasoning_effort values.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// reservedEnvKeys are variables that carry the run's own setup and can
// never be a provider key.
var reservedEnvKeys = []string{"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "CODEX_HOME", "CODEX_BIN"}

// ProfileError is a rejected profile. Its text names the field and the
// rule, never a value.
type ProfileError struct {
	Reason string
}

func (e *ProfileError) Error() string { return "codex profile: " + e.Reason }

func profileErr(reason string) error { return &ProfileError{Reason: reason} }

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
	f, err := os.Open(path)
	if err != nil {
		return Profile{}, profileErr("file cannot be opened")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return Profile{}, profileErr("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxProfileBytes+1))
	if err != nil {
		return Profile{}, profileErr("file cannot be read")
	}
	if len(data) > MaxProfileBytes {
		return Profile{}, profileErr("file is larger than 16 KiB")
	}
	return ParseProfile(data)
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
	if len(data) > MaxProfileBytes {
		return Profile{}, profileErr("file is larger than 16 KiB")
	}
	var pf profileFile
	if err := strictjson.Decode(data, &pf); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return Profile{}, profileErr(se.Error())
		}
		return Profile{}, profileErr("not a strict JSON object")
	}
	if pf.Version == nil || *pf.Version != ProfileVersion {
		return Profile{}, profileErr("version must be 1")
	}
	var p Profile
	if pf.Model != nil {
		if !validModel(*pf.Model) {
			return Profile{}, profileErr("model must be 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with -")
		}
		p.Model = *pf.Model
	}
	if pf.ReasoningEffort != nil {
		if !oneOf(*pf.ReasoningEffort, ReasoningEfforts) {
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
	if pf.Name == nil || !validName(*pf.Name) {
		return nil, profileErr("provider.name must be 1 to 64 bytes of [A-Za-z0-9 ._-]")
	}
	if pf.BaseURL == nil {
		return nil, profileErr("provider.base_url is required")
	}
	if reason := checkBaseURL(*pf.BaseURL); reason != "" {
		return nil, profileErr("provider.base_url " + reason)
	}
	if pf.WireAPI == nil || *pf.WireAPI != wireAPIResponses {
		return nil, profileErr(`provider.wire_api must be "responses"`)
	}
	prov := &Provider{Name: *pf.Name, BaseURL: *pf.BaseURL, WireAPI: *pf.WireAPI}
	if pf.EnvKey != nil {
		if !ident.ValidEnvName(*pf.EnvKey) || oneOf(*pf.EnvKey, reservedEnvKeys) {
			return nil, profileErr("provider.env_key must be a portable environment variable name, not one the run sets up itself")
		}
		prov.EnvKey = *pf.EnvKey
	}
	return prov, nil
}

func validModel(s string) bool {
	if len(s) == 0 || len(s) > maxModelBytes || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("._:/-", c) >= 0) {
			return false
		}
	}
	return true
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameBytes || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte(" ._-", c) >= 0) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// checkBaseURL returns "" for an acceptable base URL, else the rule it
// breaks (value-free).
func checkBaseURL(s string) string {
	if len(s) == 0 || len(s) > maxBaseURLBytes {
		return "must be 1 to 2048 bytes"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '\\' || s[i] == '"' {
			return "must be printable ASCII without spaces, quotes or backslashes"
		}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "":
		return "must be an absolute http(s) URL"
	case u.User != nil:
		return "must not carry user information"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return "must not carry a query or fragment"
	case u.Scheme == "https":
	case u.Scheme == "http":
		if !loopbackHost(u.Hostname()) {
			return "may use http only for a loopback host"
		}
	default:
		return "must be an absolute http(s) URL"
	}
	if strings.HasSuffix(u.Host, ":") {
		return "has an invalid port"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return "has an invalid port"
		}
	}
	return ""
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

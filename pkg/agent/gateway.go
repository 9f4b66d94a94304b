package agent

import (
	"net"
	"net/url"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Gateway is the model provider one run's agent talks to: the Worker's
// model gateway (DECISIONS 19), never the provider itself. The agent's
// base URL is the gateway's path for the chosen provider and its only key
// is the attempt's credential, which dies with the attempt's lease.
type Gateway struct {
	Provider   string // the worker.json provider id
	BaseURL    string // http://127.0.0.1:PORT/ID
	Credential string // "fgw-" and 64 hex digits
}

// Reasons a run cannot reach its provider through the gateway; all are
// misconfigurations.
const (
	ReasonNoGateway Reason = "no model gateway in the plugin's environment " +
		"(FORGE_GATEWAY_URL, FORGE_GATEWAY_TOKEN, FORGE_GATEWAY_PROVIDERS): declare the provider in worker.json providers"
	ReasonGatewayProvider Reason = "the profile's provider is not a worker.json provider of the API kind this agent speaks"
	ReasonGatewayChoice   Reason = "the Worker has no provider, or several, of the API kind this agent speaks: " +
		"name its worker.json provider id in the profile's provider"
)

// ProviderRule is the value-free rule ValidProviderID checks.
const ProviderRule = "must be a worker.json provider id (1 to 64 bytes of [a-z0-9._-], starting with a letter or digit)"

// ValidProviderID reports whether s can name a worker.json provider.
func ValidProviderID(s string) bool { return ident.ValidID(s) && len(s) <= 64 }

// SelectGateway reads the gateway the Worker handed the plugin in env and
// picks the provider of kind the agent speaks: the one named id, or, when
// id is "", the only provider of that kind. A missing or malformed
// gateway, an id that is not offered with that kind, and no or several
// providers of the kind without an id are misconfigurations.
func SelectGateway(agent string, env []string, kind gateway.Kind, id string) (Gateway, error) {
	misconfigured := func(r Reason) (Gateway, error) {
		return Gateway{}, &Error{Agent: agent, Reason: r, Class: ClassMisconfigured}
	}
	base := LookupEnv(env, plugin.EnvGatewayURL)
	cred := LookupEnv(env, plugin.EnvGatewayToken)
	offer, err := gateway.ParseOffer(LookupEnv(env, plugin.EnvGatewayProviders))
	if err != nil || !loopbackGatewayURL(base) || !validCredential(cred) {
		return misconfigured(ReasonNoGateway)
	}
	chosen := ""
	for _, p := range offer {
		switch {
		case p.Kind != kind:
		case id != "" && p.ID == id:
			chosen = p.ID
		case id == "" && chosen != "":
			return misconfigured(ReasonGatewayChoice)
		case id == "":
			chosen = p.ID
		}
	}
	if chosen == "" && id != "" {
		return misconfigured(ReasonGatewayProvider)
	}
	if chosen == "" {
		return misconfigured(ReasonGatewayChoice)
	}
	return Gateway{Provider: chosen, BaseURL: gateway.ProviderURL(base, chosen), Credential: cred}, nil
}

// loopbackGatewayURL reports whether s is what the Worker hands out:
// http://IP:PORT with a loopback IP, nothing else.
func loopbackGatewayURL(s string) bool {
	if len(s) > 64 {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback() && u.Port() != "" && u.Host == net.JoinHostPort(u.Hostname(), u.Port())
}

// validCredential reports whether s has the shape of a gateway credential.
func validCredential(s string) bool {
	hex, ok := strings.CutPrefix(s, gateway.CredentialPrefix)
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// WithoutEnv returns env without every variable whose name drop reports.
func WithoutEnv(env []string, drop func(name string) bool) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop(k) {
			out = append(out, kv)
		}
	}
	return out
}

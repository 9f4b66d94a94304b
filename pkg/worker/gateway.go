package worker

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"

	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// The model gateway (pkg/gateway, DECISIONS 19): worker.json's
// "providers" are served on one loopback port; every leased attempt gets
// a grant (lane.go) whose credential and the gateway's URL reach its
// plugin as FORGE_GATEWAY_TOKEN and FORGE_GATEWAY_URL, with the
// providers' ids and kinds as FORGE_GATEWAY_PROVIDERS, and die with the
// lease. The keys are read once, at startup, into this non-dumpable
// process; no key variable may be passed on to a plugin or a check.

// GatewayListen is where the gateway listens: loopback, a free port
// (logged at startup, and the one port an attempt needs to reach).
const GatewayListen = "127.0.0.1:0"

// parseProviders checks worker.json's providers and keeps every key
// variable away from what plugins and checks are given.
func parseProviders(c *Config, fps []gateway.FileProvider) error {
	ps, err := gateway.ParseProviders(fps)
	if err != nil {
		var fe *gateway.FieldError
		if errors.As(err, &fe) {
			return fieldErr(fe.Field, fe.Reason)
		}
		return fieldErr("providers", "invalid")
	}
	for i, p := range ps {
		field := fmt.Sprintf("providers[%d].key_env", i)
		if p.KeyEnv == c.TokenEnv {
			return fieldErr(field, "is token_env")
		}
		if slices.Contains(c.EnvironmentAllowlist, p.KeyEnv) {
			return fieldErr(field, "is in environment_allowlist: a provider key never reaches a plugin (remove it there; the plugin gets the gateway)")
		}
	}
	for i, name := range c.EnvironmentAllowlist {
		if slices.Contains(plugin.GatewayEnv, name) {
			return fieldErr(fmt.Sprintf("environment_allowlist[%d]", i), "names a variable the Worker sets itself")
		}
	}
	c.Providers = ps
	return nil
}

// OpenGateway reads every provider's key with getenv (os.Getenv) and
// starts the gateway on GatewayListen. Without providers it returns nil:
// attempts then get no gateway. Errors name the field, never a value.
func OpenGateway(c *Config, getenv func(string) string) (*gateway.Gateway, error) {
	if len(c.Providers) == 0 {
		return nil, nil
	}
	keys := make([]string, len(c.Providers))
	for i, p := range c.Providers {
		field := fmt.Sprintf("providers[%d].key_env", i)
		keys[i] = getenv(p.KeyEnv)
		if keys[i] == "" {
			return nil, fieldErr(field, "the named environment variable is unset or empty")
		}
		if !gateway.ValidKey(keys[i]) {
			return nil, fieldErr(field, "the key is not 16 to 4096 bytes of visible ASCII")
		}
	}
	g, err := gateway.New(c.Providers, keys)
	if err != nil {
		return nil, fieldErr("providers", "the gateway cannot be built")
	}
	if err := g.Listen(GatewayListen); err != nil {
		return nil, fieldErr("providers", "the gateway cannot listen on loopback")
	}
	return g, nil
}

// gatewayEnv is what an attempt's plugin is told of the gateway: nothing
// without a grant.
func gatewayEnv(gr *gateway.Grant) []string {
	if gr == nil {
		return nil
	}
	return []string{plugin.EnvGatewayURL + "=" + gr.URL(), plugin.EnvGatewayToken + "=" + gr.Credential(),
		plugin.EnvGatewayProviders + "=" + gr.Offer()}
}

// useGateway tells an attempt's plugin of the gateway (nothing without a
// grant) and lets its sandbox connect to it, and to nothing else.
func (inv *invocation) useGateway(gr *gateway.Grant) {
	if gr == nil {
		return
	}
	inv.env = append(inv.env, gatewayEnv(gr)...)
	if u, err := url.Parse(gr.URL()); err == nil {
		if ep, err := netip.ParseAddrPort(u.Host); err == nil {
			inv.connect = append(inv.connect, ep)
		}
	}
}

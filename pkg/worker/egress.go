package worker

import (
	"github.com/0k-lab/agent-forge/pkg/evidence"
	"net/netip"
	"slices"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/egress"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// An attempt's way out (DECISIONS 19, docs/sandbox.md): its sandboxed
// programs may connect to the model gateway and, when the repository's
// policy lists network_allow, to the attempt's own CONNECT proxy
// (pkg/egress), on a port of its own; scoped checks reach the proxy only
// with network_checks. Every connection the sandbox or the proxy refuses
// is counted in the attempt's refusals.

// proxyVars are the variables that point a program at the proxy; the
// lower-case forms are the ones curl, pip and git read.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}

// noProxyVars keep loopback (the gateway) off the proxy.
var noProxyVars = []string{"NO_PROXY", "no_proxy"}

// useEgress starts the attempt's refusal count and, when its policy lists
// network_allow, its proxy: the plugin is told of it and its sandbox may
// connect to it. It returns a failure code, "" when it worked.
func (inv *invocation) useEgress() string {
	inv.refusals = &sandbox.Refusals{}
	if len(inv.exec.NetworkAllow) == 0 {
		return ""
	}
	allow, err := egress.ParseAllow(inv.exec.NetworkAllow)
	if err != nil {
		return CodeInvalidPolicy
	}
	p, err := egress.Listen(allow, inv.refusals.Add)
	if err != nil {
		return CodePluginSpawnFailed
	}
	inv.proxy = p
	inv.connect = append(inv.connect, p.Endpoint())
	inv.env = withProxy(inv.env, p.URL())
	return ""
}

// closeEgress stops the attempt's proxy, cutting its tunnels.
func (inv *invocation) closeEgress() {
	if inv != nil && inv.proxy != nil {
		inv.proxy.Close()
		inv.proxy = nil
	}
}

// checkEgress is where a scoped check may connect (the proxy, with
// network_checks) and its environment with the proxy's variables.
func (inv *invocation) checkEgress(env []string) ([]netip.AddrPort, []string) {
	if inv.proxy == nil || !inv.exec.NetworkChecks {
		return nil, env
	}
	return []netip.AddrPort{inv.proxy.Endpoint()}, withProxy(env, inv.proxy.URL())
}

// withProxy is env pointing every proxy variable at url (replacing any
// the operator passed on) and keeping loopback off it.
func withProxy(env []string, url string) []string {
	names := append(slices.Clone(proxyVars), noProxyVars...)
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
	for _, n := range proxyVars {
		env = append(env, n+"="+url)
	}
	for _, n := range noProxyVars {
		env = append(env, n+"=127.0.0.1,localhost,::1")
	}
	return env
}

// networkRecord is the attempt's network/refused evidence record, false
// when nothing was refused.
func (inv *invocation) networkRecord() (evidence.Record, bool) {
	if inv == nil {
		return evidence.Record{}, false
	}
	count, kept := inv.refusals.Snapshot()
	dests := make([]evidence.Destination, 0, len(kept))
	for _, r := range kept {
		dests = append(dests, evidence.Destination{Host: r.Host, Port: int(r.Port), Count: r.Count})
	}
	return evidence.Network(count, dests)
}

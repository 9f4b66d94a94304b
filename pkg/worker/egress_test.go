package worker

import (
	"github.com/0k-lab/agent-forge/pkg/gateway"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

// An attempt whose policy lists network_allow gets its own proxy: its
// plugin's sandbox may connect to it and its environment points there
// (the operator's proxy variables replaced); its checks get it only with
// network_checks. Without network_allow there is no proxy, and a closed
// proxy no longer listens.
func TestEgressProxyPerAttempt(t *testing.T) {
	none := &invocation{exec: policy.Execution{}}
	if code := none.useEgress(); code != "" || none.proxy != nil || none.connect != nil || none.refusals == nil {
		t.Fatalf("without network_allow: %q %v %v", code, none.proxy, none.connect)
	}
	if eps, env := none.checkEgress([]string{"A=1"}); eps != nil || len(env) != 1 {
		t.Errorf("check without a proxy: %v %q", eps, env)
	}
	mk := func(checks bool) *invocation {
		inv := &invocation{exec: policy.Execution{NetworkAllow: []string{"registry.npmjs.org:443"}, NetworkChecks: checks},
			env: []string{"PATH=/usr/bin", "HTTPS_PROXY=http://operator:3128", "no_proxy=example.com"}}
		if code := inv.useEgress(); code != "" {
			t.Fatal(code)
		}
		t.Cleanup(inv.closeEgress)
		return inv
	}
	a, b := mk(false), mk(true)
	if a.proxy.Endpoint() == b.proxy.Endpoint() {
		t.Fatal("two attempts share a proxy")
	}
	if !slices.Equal(a.connect, []netip.AddrPort{a.proxy.Endpoint()}) {
		t.Errorf("connect %v", a.connect)
	}
	url := a.proxy.URL()
	for _, want := range []string{"PATH=/usr/bin", "HTTPS_PROXY=" + url, "https_proxy=" + url, "HTTP_PROXY=" + url, "ALL_PROXY=" + url, "NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1"} {
		if !slices.Contains(a.env, want) {
			t.Errorf("env lacks %q: %q", want, a.env)
		}
	}
	for _, kv := range a.env {
		if strings.Contains(kv, "operator") || strings.Contains(kv, "example.com") {
			t.Errorf("the operator's proxy variable survived: %q", kv)
		}
	}
	if eps, _ := a.checkEgress(nil); eps != nil {
		t.Errorf("a check got the proxy without network_checks: %v", eps)
	}
	if eps, env := b.checkEgress([]string{"HOME=/h"}); len(eps) != 1 || eps[0] != b.proxy.Endpoint() || !slices.Contains(env, "HTTPS_PROXY="+b.proxy.URL()) {
		t.Errorf("check with network_checks: %v %q", eps, env)
	}
	addr := a.proxy.Endpoint().String()
	a.closeEgress()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("a closed attempt's proxy still listens")
	}
}

// An attempt's plugin is told of the gateway and its sandbox may connect
// to the gateway's address and port; without a grant, neither.
func TestUseGatewayConnects(t *testing.T) {
	none := &invocation{}
	if none.useGateway(nil); none.env != nil || none.connect != nil {
		t.Error("env or connect without a grant")
	}
	c, _ := hostFixture(t)
	gw := testGateway(t, c)
	gr := gw.Issue(gateway.Budget{})
	defer gr.Revoke()
	inv := &invocation{}
	inv.useGateway(gr)
	if !slices.Equal(inv.env, gatewayEnv(gr)) {
		t.Errorf("env %q", inv.env)
	}
	if len(inv.connect) != 1 || inv.connect[0].String() != strings.TrimPrefix(gw.URL(), "http://") || int(inv.connect[0].Port()) != gw.Port() {
		t.Errorf("connect %v, gateway %s", inv.connect, gw.URL())
	}
}

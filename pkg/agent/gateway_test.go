package agent

import (
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/plugin"
)

const testCredential = "fgw-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func gatewayEnv(url, cred, offer string) []string {
	return []string{"PATH=/bin", plugin.EnvGatewayURL + "=" + url, plugin.EnvGatewayToken + "=" + cred, plugin.EnvGatewayProviders + "=" + offer}
}

func TestSelectGateway(t *testing.T) {
	two := "anthropic=anthropic-messages,openai=openai-responses"
	for _, c := range []struct {
		name, offer, id, want string
	}{
		{"the only one of the kind", two, "", "openai"},
		{"named", two, "openai", "openai"},
		{"named among several", "a=openai-responses,b=openai-responses", "b", "b"},
	} {
		gw, err := SelectGateway("x", gatewayEnv("http://127.0.0.1:4100", testCredential, c.offer), gateway.KindOpenAIResponses, c.id)
		if err != nil || gw.Provider != c.want || gw.BaseURL != "http://127.0.0.1:4100/"+c.want || gw.Credential != testCredential {
			t.Errorf("%s: %+v, %v", c.name, gw, err)
		}
	}
	for _, c := range []struct {
		name string
		env  []string
		id   string
		want Reason
	}{
		{"no gateway", []string{"PATH=/bin"}, "", ReasonNoGateway},
		{"remote gateway", gatewayEnv("http://10.0.0.1:4100", testCredential, two), "", ReasonNoGateway},
		{"https gateway", gatewayEnv("https://127.0.0.1:4100", testCredential, two), "", ReasonNoGateway},
		{"gateway with a path", gatewayEnv("http://127.0.0.1:4100/openai", testCredential, two), "", ReasonNoGateway},
		{"gateway without a port", gatewayEnv("http://127.0.0.1", testCredential, two), "", ReasonNoGateway},
		{"a key for a credential", gatewayEnv("http://127.0.0.1:4100", "sk-0123456789abcdef0123456789", two), "", ReasonNoGateway},
		{"no offer", gatewayEnv("http://127.0.0.1:4100", testCredential, ""), "", ReasonNoGateway},
		{"named, other kind", gatewayEnv("http://127.0.0.1:4100", testCredential, two), "anthropic", ReasonGatewayProvider},
		{"named, not offered", gatewayEnv("http://127.0.0.1:4100", testCredential, two), "corp", ReasonGatewayProvider},
		{"none of the kind", gatewayEnv("http://127.0.0.1:4100", testCredential, "anthropic=anthropic-messages"), "", ReasonGatewayChoice},
		{"several of the kind", gatewayEnv("http://[::1]:4100", testCredential, "a=openai-responses,b=openai-responses"), "", ReasonGatewayChoice},
	} {
		_, err := SelectGateway("x", c.env, gateway.KindOpenAIResponses, c.id)
		if ReasonOf(err) != c.want || CategoryOf(err) != plugin.CategoryIncompatible {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "fgw-") {
			t.Errorf("%s: the error names the credential", c.name)
		}
	}
}

func TestWithoutEnv(t *testing.T) {
	got := WithoutEnv([]string{"A=1", "OPENAI_API_KEY=k", "B=2=3", "OPENAI_BASE_URL=u"}, func(k string) bool { return strings.HasPrefix(k, "OPENAI_") })
	if strings.Join(got, " ") != "A=1 B=2=3" {
		t.Errorf("%q", got)
	}
}

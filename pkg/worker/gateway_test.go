package worker

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/gateway"
	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// grantExec records each attempt's grant and the gateway's answer to
// its credential while the attempt runs; "block" waits for ctx.
type grantExec struct {
	grants chan *gateway.Grant
	live   chan int // status of a request with the credential, mid-attempt
	ended  chan struct{}
}

func (x *grantExec) Execute(ctx context.Context, a *Attempt) Report {
	x.grants <- a.Grant
	x.live <- gatewayStatus(a.Grant.URL(), a.Grant.Credential())
	if strings.Contains(string(a.Lease.Task), "block") {
		<-ctx.Done()
		x.ended <- struct{}{}
		return Report{Cancelled: true, Code: CodePluginFailed}
	}
	return Report{Succeeded: true, Output: "ok"}
}

// gatewayStatus posts to the test provider with cred: 502 (its upstream
// is unreachable) says the credential was accepted, 401 that it was not.
func gatewayStatus(base, cred string) int {
	req, _ := http.NewRequest("POST", gateway.ProviderURL(base, "p")+"/responses", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func testGateway(t *testing.T, c *Config) *gateway.Gateway {
	t.Helper()
	var err error
	c.Providers, err = gateway.ParseProviders([]gateway.FileProvider{{ID: "p", Kind: "openai-responses", BaseURL: "https://127.0.0.1:9", KeyEnv: "P_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := OpenGateway(c, func(string) string { return testProviderKey })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// TestGrantLivesWithTheLease: every attempt gets its own credential,
// accepted while it runs and refused once it reported or lost its lease.
func TestGrantLivesWithTheLease(t *testing.T) {
	g := newFakeGate(t)
	cfg := laneConfig(t, g, 1)
	gw := testGateway(t, cfg)
	x := &grantExec{grants: make(chan *gateway.Grant, 4), live: make(chan int, 4), ended: make(chan struct{}, 4)}
	startWorker(t, Options{Config: cfg, Gateway: gw, Executors: map[wire.Kind]Executor{wire.KindText: x}})
	c := g.accept()

	c.lease(t, textLease("j_1", "a_1", testPolicy("reference"), "done"))
	first := recv(t, x.grants, "first grant")
	if st := recv(t, x.live, "first status"); st != http.StatusBadGateway {
		t.Fatalf("a running attempt's credential got %d", st)
	}
	res := c.nextOf(t, wire.TypeResult)
	if st := gatewayStatus(gw.URL(), first.Credential()); st != http.StatusUnauthorized {
		t.Errorf("a reported attempt's credential got %d", st)
	}
	c.reply(t, res.Seq, true)

	c.lease(t, textLease("j_2", "a_1", testPolicy("reference"), "block"))
	second := recv(t, x.grants, "second grant")
	recv(t, x.live, "second status")
	if second.Credential() == first.Credential() {
		t.Fatal("two attempts share a credential")
	}
	if err := c.Send(wire.Envelope{Type: wire.TypeCancel, Cancel: &wire.Cancel{JobID: "j_2", AttemptID: "a_1", Reason: wire.CancelExpired}}); err != nil {
		t.Fatal(err)
	}
	recv(t, x.ended, "cancellation")
	if st := gatewayStatus(gw.URL(), second.Credential()); st != http.StatusUnauthorized {
		t.Errorf("a cancelled attempt's credential got %d", st)
	}
}

func TestGatewayEnv(t *testing.T) {
	if gatewayEnv(nil) != nil {
		t.Error("env without a grant")
	}
	c, _ := hostFixture(t)
	gw := testGateway(t, c)
	gr := gw.Issue(gateway.Budget{})
	defer gr.Revoke()
	env := gatewayEnv(gr)
	want := []string{plugin.EnvGatewayURL + "=" + gw.URL(), plugin.EnvGatewayToken + "=" + gr.Credential(),
		plugin.EnvGatewayProviders + "=p=openai-responses"}
	if !slices.Equal(env, want) {
		t.Errorf("env %q", env)
	}
	for _, kv := range env {
		if strings.Contains(kv, testProviderKey) {
			t.Error("the key reached the plugin's environment")
		}
	}
}

func TestOpenGatewayRefusesAMissingKey(t *testing.T) {
	c, _ := hostFixture(t)
	c.Providers, _ = gateway.ParseProviders([]gateway.FileProvider{{ID: "p", Kind: "openai-responses", BaseURL: "https://127.0.0.1:9", KeyEnv: "P_KEY"}})
	for _, v := range []string{"", "two words here to be long", "short-key"} {
		_, err := OpenGateway(c, func(string) string { return v })
		if err == nil || !strings.Contains(err.Error(), "providers[0].key_env") || (v != "" && strings.Contains(err.Error(), v)) {
			t.Errorf("key %q: %v", v, err)
		}
	}
	c.Providers = nil
	if gw, err := OpenGateway(c, nil); gw != nil || err != nil {
		t.Errorf("no providers: %v %v", gw, err)
	}
}

func TestParseConfigProviders(t *testing.T) {
	withProviders := func(edit func(m map[string]any)) error {
		m := baseConfig()
		m["providers"] = []any{map[string]any{"id": "openai", "kind": "openai-responses", "base_url": "https://api.openai.com/v1", "key_env": "OPENAI_API_KEY",
			"headers": map[string]any{"OpenAI-Organization": "org-1"}}}
		if edit != nil {
			edit(m)
		}
		_, err := ParseConfig(mustJSON(t, m))
		return err
	}
	if err := withProviders(nil); err != nil {
		t.Fatalf("valid providers refused: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(m map[string]any)
	}{
		{"key passed to plugins", "providers[0].key_env: is in environment_allowlist", func(m map[string]any) {
			m["environment_allowlist"] = []any{"PATH", "OPENAI_API_KEY"}
		}},
		{"key is the token", "providers[0].key_env: is token_env", func(m map[string]any) { m["token_env"] = "OPENAI_API_KEY" }},
		{"gateway variable allowlisted", "environment_allowlist[1]: names a variable the Worker sets itself", func(m map[string]any) {
			m["environment_allowlist"] = []any{"PATH", plugin.EnvGatewayToken}
		}},
		{"gateway offer allowlisted", "environment_allowlist[1]: names a variable the Worker sets itself", func(m map[string]any) {
			m["environment_allowlist"] = []any{"PATH", plugin.EnvGatewayProviders}
		}},
		{"http upstream", "providers[0].base_url", func(m map[string]any) {
			m["providers"].([]any)[0].(map[string]any)["base_url"] = "http://api.openai.com/v1"
		}},
		{"unknown member", "", func(m map[string]any) {
			m["providers"].([]any)[0].(map[string]any)["api_key"] = "sk-inline"
		}},
	} {
		err := withProviders(c.edit)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "sk-inline") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

const testProviderKey = "sk-test-provider-key-0123456789"

// TestSecretsHoldTheProviderKeys: the set the coding pipeline scans
// candidates and evidence for holds every provider key.
func TestSecretsHoldTheProviderKeys(t *testing.T) {
	c, _ := hostFixture(t)
	gw := testGateway(t, c)
	s, err := Secrets(c, testToken, gw)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{testProviderKey, testToken, "x" + base64.StdEncoding.EncodeToString([]byte("y"+testProviderKey))} {
		if !s.Contains([]byte("before " + v + " after")) {
			t.Errorf("the set misses a value")
		}
	}
}

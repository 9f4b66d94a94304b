package gate

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/store"
)

func TestVersionRouteIsOwnerOnlyAndReportsTheBuild(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)

	code, body := tg.api(http.MethodGet, "/v1/version", testOwnerToken, nil)
	if code != http.StatusOK {
		t.Fatalf("owner GET /v1/version: %d %s", code, body)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"version": buildinfo.Version(), "commit": buildinfo.Commit(), "schema_version": float64(store.SchemaVersion)}
	if len(v) != len(want) {
		t.Fatalf("body %s", body)
	}
	for k, w := range want {
		if v[k] != w {
			t.Fatalf("%s = %v, want %v", k, v[k], w)
		}
	}
	for _, tok := range []string{"", testWorkerToken, "wrong"} {
		if code, _ := tg.api(http.MethodGet, "/v1/version", tok, nil); code != http.StatusUnauthorized {
			t.Fatalf("token %q: %d, want 401", tok, code)
		}
	}
	if code, _ := tg.api(http.MethodPost, "/v1/version", testOwnerToken, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d, want 405", code)
	}
}

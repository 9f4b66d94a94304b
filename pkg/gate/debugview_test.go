package gate

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The debug viewer is mounted: its JSON routes answer only the owner
// token (a Worker token is refused like no token), its static shell is
// public, and it shows what the store holds.
func TestDebugViewerMountedOwnerOnly(t *testing.T) {
	cfg, sec := testConfig(t, nil)
	tg := startGate(t, cfg, sec, "", nil)
	connect(t, tg.addr, testWorkerToken, "worker-1", 0, plugins(), noRepos())
	job := tg.submit(`{"input":"secret task text"}`)
	routes := []string{"/v1/debug/jobs", "/v1/debug/workers", "/v1/debug/jobs/" + job.ID}
	for _, path := range routes {
		for _, tok := range []string{"", testWorkerToken, "not-a-token"} {
			code, body := tg.api("GET", path, tok, nil)
			if code != http.StatusUnauthorized {
				t.Fatalf("%s with token %q: %d %s", path, tok, code, body)
			}
			if contains(body, job.ID) {
				t.Fatalf("%s leaked data without the owner token", path)
			}
		}
		code, body := tg.api("GET", path, testOwnerToken, nil)
		if code != http.StatusOK {
			t.Fatalf("%s as owner: %d %s", path, code, body)
		}
		if contains(body, "secret task text") {
			t.Fatalf("%s shows task input: %s", path, body)
		}
	}
	_, body := tg.api("GET", "/v1/debug/jobs", testOwnerToken, nil)
	var jobs struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &jobs); err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != job.ID {
		t.Fatalf("jobs %s (%v)", body, err)
	}
	if _, body := tg.api("GET", "/v1/debug/workers", testOwnerToken, nil); !contains(body, `"worker-1"`) {
		t.Fatalf("workers %s", body)
	}
	if code, _ := tg.api("POST", "/v1/debug/jobs", testOwnerToken, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST as owner: %d", code)
	}
	if code, body := tg.api("GET", "/debug/", "", nil); code != http.StatusOK || !contains(body, "<html") {
		t.Fatalf("shell: %d %.80s", code, body)
	}
	// The prefixes without their slash are unknown routes, not redirects.
	for _, path := range []string{"/debug", "/v1/debug"} {
		for _, tok := range []string{"", testOwnerToken} {
			if code, body := tg.api("GET", path, tok, nil); code != http.StatusNotFound || !contains(body, `"not_found"`) {
				t.Fatalf("%s: %d %s", path, code, body)
			}
		}
	}
}

package publish

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
)

// jwtGitHub checks every App JWT's exp against its clock, as GitHub does,
// and makes the installation lookup wait out secondary limits first.
type jwtGitHub struct {
	mu      sync.Mutex
	now     time.Time
	limited int    // installation lookups still answered 403 retry-after
	expired int    // requests refused for an expired JWT
	repo    string // the repository tokens are granted for (default "r")
}

func (g *jwtGitHub) clock() time.Time { g.mu.Lock(); defer g.mu.Unlock(); return g.now }
func (g *jwtGitHub) sleep(_ context.Context, d time.Duration) error {
	g.mu.Lock()
	g.now = g.now.Add(d)
	g.mu.Unlock()
	return nil
}

func (g *jwtGitHub) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	parts := strings.Split(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), ".")
	var claims struct{ Exp int64 }
	if len(parts) == 3 {
		b, _ := base64.RawURLEncoding.DecodeString(parts[1])
		json.Unmarshal(b, &claims)
	}
	if !time.Unix(claims.Exp, 0).After(g.clock()) {
		g.expired++
		reply(401, map[string]string{"message": "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"})
		return w.Result(), nil
	}
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/installation"):
		if g.limited > 0 {
			g.limited--
			w.Header().Set("Retry-After", "300")
			reply(403, map[string]string{"message": "You have exceeded a secondary rate limit."})
			break
		}
		reply(200, map[string]any{"id": 7, "permissions": map[string]string{"contents": "write", "pull_requests": "write"}})
	case r.Method == http.MethodPost:
		repo := g.repo
		if repo == "" {
			repo = "r"
		}
		reply(201, map[string]any{"token": "ghs_0123456789abcdefghijABCDEFGHIJ012345",
			"expires_at":           g.clock().Add(time.Hour).UTC().Format(time.RFC3339),
			"permissions":          map[string]string{"contents": "write", "pull_requests": "write", "metadata": "read"},
			"repository_selection": "selected", "repositories": []map[string]string{{"name": repo}}})
	default:
		reply(404, map[string]string{"message": "Not Found"})
	}
	return w.Result(), nil
}

// Waiting out GitHub's limits can outlast the App JWT's nine minutes: the
// token request must not go out with a JWT GitHub already calls expired.
func TestTokenOutlivesLimitWaits(t *testing.T) {
	pem, err := os.ReadFile("../github/testdata/app-key-pkcs1.pem")
	if err != nil {
		t.Fatal(err)
	}
	key, err := github.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	gh := &jwtGitHub{now: time.Unix(1_700_000_000, 0), limited: 2}
	pb := New(&Config{Owner: "o", Repository: "r"}, &Credentials{AppID: "12345", Key: key},
		Env{Transport: gh, Now: gh.clock, Sleep: gh.sleep})
	tok, err := pb.token(context.Background(), github.DerivePermissions(nil))
	if err != nil || gh.expired != 0 {
		t.Fatalf("token %v, err %v, %d requests with an expired JWT", tok, err, gh.expired)
	}
}

package githubfake

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
)

type apiFixture struct {
	*fixture
	api    *API
	key    *rsa.PrivateKey
	client *github.Client
	tr     *http.Transport
	tokens *strings.Builder
}

func newAPIFixture(t testing.TB, perms map[string]string) *apiFixture {
	t.Helper()
	f := newFixture(t)
	pemBytes, err := os.ReadFile("../github/testdata/app-key-pkcs1.pem")
	if err != nil {
		t.Fatal(err)
	}
	key, err := github.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	tokens := &strings.Builder{}
	api := NewAPI(AppConfig{AppID: 12345, ClientID: "Iv1.fake", PublicKey: &key.PublicKey,
		Installations: []InstallationConfig{{ID: 77, Owner: "octo", Repositories: []string{"app"}, Permissions: perms}}},
		f.root, "git", time.Now, tokens)
	api.Attach(f.srv)
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(f.caFile)
	pool.AppendCertsFromPEM(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+f.port)
		}}
	t.Cleanup(tr.CloseIdleConnections)
	sleep := func(context.Context, time.Duration) error { return nil }
	client := github.New(tr, time.Now, github.Options{Sleep: sleep})
	return &apiFixture{fixture: f, api: api, key: key, client: client, tr: tr, tokens: tokens}
}

func (a *apiFixture) jwt(t *testing.T) string {
	t.Helper()
	j, err := github.AppJWT(a.key, "12345", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// rawJWT signs arbitrary claims with the App key.
func (a *apiFixture) rawJWT(t *testing.T, key *rsa.PrivateKey, claims string) string {
	enc := base64.RawURLEncoding
	s := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(s))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return s + "." + enc.EncodeToString(sig)
}

func (a *apiFixture) get(t *testing.T, path, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com"+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := (&http.Client{Transport: a.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Message string `json:"message"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.Header.Get("X-RateLimit-Remaining") == "" || resp.Header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("%s: no rate-limit headers", path)
	}
	return resp.StatusCode, body.Message
}

var basePerms = map[string]string{"contents": "write", "pull_requests": "write", "metadata": "read"}

func TestFakeJWTChecks(t *testing.T) {
	a := newAPIFixture(t, basePerms)
	now := time.Now().Unix()
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	itoa := func(n int64) string { b, _ := json.Marshal(n); return string(b) }
	for _, tc := range []struct {
		name   string
		token  string
		status int
		msg    string
	}{
		{"valid", a.jwt(t), 200, ""},
		{"client id issuer", a.rawJWT(t, a.key, `{"iat":`+itoa(now-60)+`,"exp":`+itoa(now+540)+`,"iss":"Iv1.fake"}`), 200, ""},
		{"exp too far", a.rawJWT(t, a.key, `{"iat":`+itoa(now-60)+`,"exp":`+itoa(now+660)+`,"iss":12345}`), 401, msgEXPTooFar},
		{"exp past", a.rawJWT(t, a.key, `{"iat":`+itoa(now-600)+`,"exp":`+itoa(now-5)+`,"iss":12345}`), 401, msgEXPInvalid},
		{"float iat", a.rawJWT(t, a.key, `{"iat":`+itoa(now-60)+`.5,"exp":`+itoa(now+540)+`,"iss":12345}`), 401, msgIATNotInteger},
		{"string exp", a.rawJWT(t, a.key, `{"iat":`+itoa(now-60)+`,"exp":"`+itoa(now+540)+`","iss":12345}`), 401, msgEXPInvalid},
		{"other key", a.rawJWT(t, other, `{"iat":`+itoa(now-60)+`,"exp":`+itoa(now+540)+`,"iss":12345}`), 401, msgJWTUndecodable},
		{"other app", a.rawJWT(t, a.key, `{"iat":`+itoa(now-60)+`,"exp":`+itoa(now+540)+`,"iss":999}`), 401, msgJWTUndecodable},
		{"garbage", "abc", 401, msgJWTUndecodable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := a.get(t, "/repos/octo/app/installation", tc.token)
			if status != tc.status || msg != tc.msg {
				t.Fatalf("got %d %q, want %d %q", status, msg, tc.status, tc.msg)
			}
		})
	}
	if status, _ := a.get(t, "/repos/octo/other/installation", a.jwt(t)); status != 404 {
		t.Fatalf("uninstalled repository: %d", status)
	}
}

func TestFakeTokenMinting(t *testing.T) {
	a := newAPIFixture(t, basePerms)
	ctx := context.Background()
	inst, err := a.client.Installation(ctx, a.jwt(t), "octo", "app")
	if err != nil || inst.ID != 77 {
		t.Fatalf("installation %+v, %v", inst, err)
	}
	want := github.DerivePermissions(nil)
	tok, err := a.client.CreateToken(ctx, a.jwt(t), inst.ID, "app", want)
	if err != nil || !strings.Contains(a.tokens.String(), tok.Value()) {
		t.Fatalf("token: %v", err)
	}
	// GitHub's grant carries the implicit metadata: read beside the request.
	if tok.Permissions["metadata"] != "read" || len(tok.Permissions) != len(want)+1 {
		t.Fatalf("granted %v", tok.Permissions)
	}
	wf := github.DerivePermissions([]string{".github/workflows/ci.yml"})
	if _, err := a.client.CreateToken(ctx, a.jwt(t), inst.ID, "app", wf); !github.IsClass(err, github.ClassValidation) {
		t.Fatalf("workflows without the grant: %v", err)
	}
	if _, err := a.client.CreateToken(ctx, a.jwt(t), inst.ID, "app", github.Permissions{"contents": "admin"}); !github.IsClass(err, github.ClassValidation) {
		t.Fatalf("bad level: %v", err)
	}
	if err := a.api.SetPermissions(77, map[string]string{"contents": "write", "pull_requests": "write", "workflows": "write"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.CreateToken(ctx, a.jwt(t), inst.ID, "app", wf); err != nil {
		t.Fatalf("workflows with the grant: %v", err)
	}
	if err := a.client.Revoke(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.PullsForBranch(ctx, tok, "octo", "app", "x"); !github.IsClass(err, github.ClassUnauthorized) {
		t.Fatalf("revoked token still works: %v", err)
	}
	if err := a.api.SetAPIFault(APIFaultSecondaryRetryAfter, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.CreateToken(ctx, a.jwt(t), inst.ID, "app", want); err != nil {
		t.Fatalf("after a secondary limit with retry-after: %v", err)
	}
}

func TestFakePullRequests(t *testing.T) {
	a := newAPIFixture(t, basePerms)
	ctx := context.Background()
	base := a.seed(t, "octo/app")
	bare := filepath.Join(a.root, "octo/app.git")
	mustGit := func(args ...string) string {
		out, err := a.git(t, "", append([]string{"--git-dir=" + bare}, args...)...)
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(out)
	}
	tree := mustGit("rev-parse", base+"^{tree}")
	head := mustGit("commit-tree", tree, "-p", base, "-m", "change")
	mustGit("update-ref", "refs/heads/feature", head)
	mustGit("update-ref", "refs/heads/other", head)

	tok, err := a.client.CreateToken(ctx, a.jwt(t), 77, "app", github.DerivePermissions(nil))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := a.client.CreatePull(ctx, tok, "octo", "app", "feature", "main", "t", "b")
	if err != nil || pr.Number != 1 || pr.HeadSHA != head || !pr.Open() {
		t.Fatalf("create: %+v, %v", pr, err)
	}
	if _, err := a.client.CreatePull(ctx, tok, "octo", "app", "feature", "main", "t", "b"); !github.PRExists(err) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := a.client.CreatePull(ctx, tok, "octo", "app", "main", "main", "t", "b"); !github.IsClass(err, github.ClassValidation) || github.PRExists(err) {
		t.Fatalf("no commits between: %v", err)
	}
	if err := a.api.SetAPIFault(APIFaultLosePRCreate, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.CreatePull(ctx, tok, "octo", "app", "other", "main", "t", "b"); !github.IsClass(err, github.ClassTransport) {
		t.Fatalf("lost response: %v", err)
	}
	got, err := a.client.PullsForBranch(ctx, tok, "octo", "app", "other")
	if err != nil || len(got) != 1 || got[0].Number != 2 {
		t.Fatalf("PR behind the lost response: %+v, %v", got, err)
	}
	// The quirk: a head filter without the owner prefix lists every PR.
	var all []map[string]any
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/octo/app/pulls?head=other&state=all", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Value())
	resp, err := (&http.Client{Transport: a.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&all)
	resp.Body.Close()
	if len(all) != 2 {
		t.Fatalf("bare head filter listed %d PRs, want all 2", len(all))
	}
	a.api.SetPullState("octo", "app", 1, "closed", true)
	got, err = a.client.PullsForBranch(ctx, tok, "octo", "app", "feature")
	if err != nil || len(got) != 1 || !got[0].Merged || got[0].Open() {
		t.Fatalf("merged PR: %+v, %v", got, err)
	}
	readOnly, err := a.client.CreateToken(ctx, a.jwt(t), 77, "app", github.Permissions{"contents": "read"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.PullsForBranch(ctx, readOnly, "octo", "app", "feature"); !github.IsClass(err, github.ClassPermission) {
		t.Fatalf("token without pull_requests: %v", err)
	}
}

func TestFakeGitPushNeedsTokenAndWorkflowsGrant(t *testing.T) {
	a := newAPIFixture(t, map[string]string{"contents": "write", "pull_requests": "write", "workflows": "write"})
	ctx := context.Background()
	a.seed(t, "octo/app")
	if err := WriteWorkflowHook(filepath.Join(a.root, "octo/app.git")); err != nil {
		t.Fatal(err)
	}
	plain, err := a.client.CreateToken(ctx, a.jwt(t), 77, "app", github.DerivePermissions(nil))
	if err != nil {
		t.Fatal(err)
	}
	header := func(tok *github.Token) string {
		return "http.extraHeader=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok.Value()))
	}
	work := filepath.Join(t.TempDir(), "w")
	if out, err := a.git(t, "", "clone", "-q", a.url("octo/app"), work); err == nil {
		t.Fatalf("anonymous clone of a private repository: %s", out)
	}
	if out, err := a.git(t, "", "-c", header(plain), "clone", "-q", a.url("octo/app"), work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	os.MkdirAll(filepath.Join(work, ".github/workflows"), 0o755)
	os.WriteFile(filepath.Join(work, ".github/workflows/ci.yml"), []byte("on: push\n"), 0o644)
	if out, err := a.git(t, work, "add", "-A"); err != nil {
		t.Fatal(out)
	}
	if out, err := a.git(t, work, "commit", "-q", "-m", "ci"); err != nil {
		t.Fatal(out)
	}
	push := func(tok *github.Token) (string, error) {
		return a.git(t, work, "-c", header(tok), "push", "origin", "HEAD:refs/heads/wf")
	}
	out, err := push(plain)
	if err == nil || !strings.Contains(out, "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission") {
		t.Fatalf("push without workflows: %v\n%s", err, out)
	}
	withWF, err := a.client.CreateToken(ctx, a.jwt(t), 77, "app", github.DerivePermissions([]string{".github/workflows/ci.yml"}))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := push(withWF); err != nil {
		t.Fatalf("push with workflows: %v\n%s", err, out)
	}
	a.client.Revoke(ctx, withWF)
	if out, err := push(withWF); err == nil {
		t.Fatalf("push with a revoked token: %s", out)
	}
	raw, _ := os.ReadFile(a.logPath)
	if strings.Contains(string(raw), plain.Value()) || strings.Contains(string(raw), withWF.Value()) {
		t.Fatal("request log holds a token")
	}
}

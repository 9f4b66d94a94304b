package github_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/github"
	"github.com/0k-lab/agent-forge/pkg/githubfake"
)

// The contract with the real GitHub (issue 38 item 5): every request
// pkg/github builds, for every exported Client method, is recorded while
// the real client talks to pkg/githubfake, and checked against GitHub's
// official OpenAPI description (pinned: testdata/octokit-openapi):
//
//   - it is an operation of the description (method and path template,
//     path parameters valid), every query parameter is one the operation
//     declares, with a valid value, and the required ones are present;
//   - its body validates against the operation's request schema, strictly
//     (a property the schema does not name is an error);
//   - the fake's answer has a status the operation documents (or 304 to
//     a conditional request) and validates against its response schema;
//   - every example the description gives for that answer is parsed by
//     the client: the same call is replayed with the example as GitHub's
//     answer, its identity fields (numbers, URLs, names) aligned with the
//     request, and must succeed.
//
// Methods are enumerated by reflection: one without an entry in
// contractDrivers is called with arguments made from its parameters'
// names (contractArg), and if that is impossible the test fails, so a new
// call cannot escape the contract.

// contractEnv is the fake GitHub and what the drivers act on.
type contractEnv struct {
	api      *githubfake.API
	app      github.App
	plain    *github.Client // set-up calls, not recorded
	tok      *github.Token  // contents, pull_requests, issues write; actions read
	spare    *github.Token  // for Revoke
	pr       int            // open pull request on feature
	prHead   string
	mergePR  int // open pull request on merge-me (Merge merges it)
	mergeSHA string
	issue    int
	comment  int64 // bob's comment on issue
	mine     int64 // the App's comment on issue
	review   int64 // bob's review comment on pr
	since    time.Time
}

func (e *contractEnv) jwt() string {
	j, err := github.AppJWT(e.app.Key, e.app.ID, time.Now())
	if err != nil {
		panic(err)
	}
	return j
}

// driver calls one Client method, perhaps in several ways. accept, when
// set, also takes an error as a successful outcome of an example replay.
type driver struct {
	method string
	call   func(ctx context.Context, c *github.Client, e *contractEnv) error
	accept func(error) bool
}

func firstErr(errs ...error) error { return errors.Join(errs...) }

var contractDrivers = []driver{
	{method: "Installation", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.Installation(ctx, e.jwt(), "octo", "app")
		return err
	}},
	{method: "InstallationAs", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.InstallationAs(ctx, e.app, "octo", "app")
		return err
	}},
	{method: "CreateToken", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.CreateToken(ctx, e.jwt(), 77, "app", github.DerivePermissions(nil))
		return err
	}, accept: grantsOther},
	{method: "CreateTokenAs", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.CreateTokenAs(ctx, e.app, 77, "app", github.Permissions{github.PermActions: github.Read})
		return err
	}, accept: grantsOther},
	{method: "Revoke", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		return c.Revoke(ctx, e.spare)
	}},
	{method: "AppSlugAs", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.AppSlugAs(ctx, e.app)
		return err
	}},
	{method: "PullsForBranch", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.PullsForBranch(ctx, e.tok, "octo", "app", "feature")
		return err
	}},
	{method: "CreatePull", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.CreatePull(ctx, e.tok, "octo", "app", "fresh", "main", "Fix the parser", "Fixes #1\n\nbody")
		return err
	}},
	{method: "GetPull", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.GetPull(ctx, e.tok, "octo", "app", e.pr)
		return err
	}},
	{method: "GetPullIfChanged", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, etag, _, err := c.GetPullIfChanged(ctx, e.tok, "octo", "app", e.pr, "")
		if err != nil || etag == "" {
			return firstErr(err, errors.New("no ETag"))
		}
		_, _, _, err = c.GetPullIfChanged(ctx, e.tok, "octo", "app", e.pr, etag)
		return err
	}},
	{method: "Merge", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.Merge(ctx, e.tok, "octo", "app", e.mergePR, e.mergeSHA)
		return err
	}},
	{method: "Merged", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err1 := c.Merged(ctx, e.tok, "octo", "app", e.mergePR)
		_, err2 := c.Merged(ctx, e.tok, "octo", "app", e.pr)
		return firstErr(err1, err2)
	}},
	{method: "ListRuns", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		p, err := c.ListRuns(ctx, e.tok, "octo", "app", e.prHead, "")
		if err != nil || p.ETag == "" {
			return firstErr(err, errors.New("no ETag"))
		}
		_, err1 := c.ListRuns(ctx, e.tok, "octo", "app", e.prHead, p.ETag)
		_, err2 := c.ListRuns(ctx, nil, "octo", "app", e.prHead, "")
		return firstErr(err1, err2)
	}},
	{method: "ListIssuesSince", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		p, err := c.ListIssuesSince(ctx, e.tok, "octo", "app", e.since, github.FeedPerPage, "")
		if err != nil {
			return err
		}
		_, err = c.ListIssuesSince(ctx, e.tok, "octo", "app", e.since, github.FeedPerPage, p.ETag)
		return err
	}},
	{method: "ListIssueCommentsSince", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		p, err := c.ListIssueCommentsSince(ctx, e.tok, "octo", "app", e.since, 10, "")
		if err != nil {
			return err
		}
		_, err = c.ListIssueCommentsSince(ctx, e.tok, "octo", "app", e.since, 10, p.ETag)
		return err
	}},
	{method: "GetIssue", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err1 := c.GetIssue(ctx, e.tok, "octo", "app", e.issue)
		_, err2 := c.GetIssue(ctx, e.tok, "octo", "app", e.pr)
		return firstErr(err1, err2)
	}},
	{method: "IssueEvents", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.IssueEvents(ctx, e.tok, "octo", "app", e.issue)
		return err
	}},
	{method: "IssueComments", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.IssueComments(ctx, e.tok, "octo", "app", e.issue)
		return err
	}},
	{method: "Permission", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err1 := c.Permission(ctx, e.tok, "octo", "app", "bob")
		_, err2 := c.Permission(ctx, e.tok, "octo", "app", "nobody-at-all")
		return firstErr(err1, err2)
	}},
	{method: "AddReaction", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		return firstErr(c.AddReaction(ctx, e.tok, "octo", "app", github.ReactIssue, int64(e.issue), github.ReactionEyes),
			c.AddReaction(ctx, e.tok, "octo", "app", github.ReactComment, e.comment, github.ReactionPlusOne),
			c.AddReaction(ctx, e.tok, "octo", "app", github.ReactReviewComment, e.review, github.ReactionConfused))
	}},
	{method: "CreateIssueComment", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.CreateIssueComment(ctx, e.tok, "octo", "app", e.issue, "Accepted as job 01J")
		return err
	}},
	{method: "EditIssueComment", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err := c.EditIssueComment(ctx, e.tok, "octo", "app", e.mine, "Running")
		return err
	}},
	{method: "ListReviews", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		p, err := c.ListReviews(ctx, e.tok, "octo", "app", e.pr, "")
		if err != nil || p.ETag == "" {
			return firstErr(err, errors.New("no ETag"))
		}
		_, err = c.ListReviews(ctx, e.tok, "octo", "app", e.pr, p.ETag)
		return err
	}},
	{method: "ListReviewCommentsSince", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		p, err := c.ListReviewCommentsSince(ctx, e.tok, "octo", "app", e.since, github.FeedPerPage, "")
		if err != nil || p.ETag == "" {
			return firstErr(err, errors.New("no ETag"))
		}
		_, err = c.ListReviewCommentsSince(ctx, e.tok, "octo", "app", e.since, github.FeedPerPage, p.ETag)
		return err
	}},
	{method: "BranchHead", call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		_, err1 := c.BranchHead(ctx, e.tok, "octo", "app", "main")
		_, err2 := c.BranchHead(ctx, e.tok, "octo", "app", "forge/job-1")
		return firstErr(err1, err2)
	}},
}

// grantsOther: GitHub's example token grants other permissions than the
// driver asked for, which the client refuses by design after decoding.
func grantsOther(err error) bool { return errors.Is(err, github.ErrPermissionsMismatch) }

// exchange is one recorded request and its answer.
type exchange struct {
	method, path string // path escaped
	query        url.Values
	header       http.Header
	body         []byte
	status       int
	respHeader   http.Header
	respBody     []byte
}

// handlerTransport answers in process with h.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// recording passes requests to next and keeps each exchange.
type recording struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []*exchange
}

func readAll(r io.ReadCloser) []byte {
	if r == nil {
		return nil
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return b
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	x := &exchange{method: req.Method, path: req.URL.EscapedPath(), query: req.URL.Query(), header: req.Header.Clone(), body: readAll(req.Body)}
	req.Body = io.NopCloser(bytes.NewReader(x.body))
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	x.status, x.respHeader, x.respBody = resp.StatusCode, resp.Header.Clone(), readAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(x.respBody))
	r.mu.Lock()
	r.log = append(r.log, x)
	r.mu.Unlock()
	return resp, nil
}

// replay answers a driver's requests from its recording, in order, with
// the answer at index target replaced by body. A request the recording
// does not have (the client took another way) is answered 502; every
// request is kept for the contract checks.
type replay struct {
	rec    []*exchange
	target int
	body   []byte
	n      int
	seen   []*exchange
}

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	x := &exchange{method: req.Method, path: req.URL.EscapedPath(), query: req.URL.Query(), header: req.Header.Clone(), body: readAll(req.Body)}
	r.seen = append(r.seen, x)
	i := r.n
	r.n++
	resp := &http.Response{Request: req, Header: http.Header{}, ProtoMajor: 1, ProtoMinor: 1}
	if i >= len(r.rec) || r.rec[i].method != x.method || r.rec[i].path != x.path {
		resp.StatusCode = http.StatusBadGateway
		resp.Body = io.NopCloser(strings.NewReader(`{"message":"not in the recording"}`))
		return resp, nil
	}
	resp.StatusCode, resp.Header = r.rec[i].status, r.rec[i].respHeader.Clone()
	body := r.rec[i].respBody
	if i == r.target {
		body = r.body
		resp.Header.Del("Content-Length")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func newContractClient(tr http.RoundTripper) *github.Client {
	return github.New(tr, time.Now, github.Options{Sleep: func(context.Context, time.Duration) error { return nil }, Attempts: 2})
}

// newContractEnv serves octo/app from a fresh bare repository (main, and
// the branches feature, merge-me, fresh and forge/job-1, each one commit
// ahead) through githubfake's API, with an open pull request on feature
// and one on merge-me, an issue labelled by a maintainer with a comment,
// the App's own comment, and a review comment.
func newContractEnv(t *testing.T) (*contractEnv, http.Handler) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	git(work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644)
	git(work, "add", "README")
	git(work, "commit", "-qm", "first")
	heads := map[string]string{}
	for i, b := range []string{"feature", "merge-me", "fresh", "forge/job-1"} {
		git(work, "checkout", "-q", "-b", b, "main")
		os.WriteFile(filepath.Join(work, "README"), []byte(fmt.Sprintf("hello\nline %d\n", i)), 0o644)
		git(work, "commit", "-qam", "change "+b)
		heads[b] = git(work, "rev-parse", "HEAD")
	}
	git(work, "checkout", "-q", "main")
	repos := filepath.Join(root, "repos")
	git(root, "clone", "-q", "--bare", work, filepath.Join(repos, "octo", "app.git"))

	pemBytes, err := os.ReadFile("testdata/app-key-pkcs1.pem")
	if err != nil {
		t.Fatal(err)
	}
	key, err := github.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	api := githubfake.NewAPI(githubfake.AppConfig{AppID: 12345, ClientID: "Iv1.fake", PublicKey: &key.PublicKey,
		Installations: []githubfake.InstallationConfig{{ID: 77, Owner: "octo", Repositories: []string{"app"},
			Permissions: map[string]string{"contents": "write", "pull_requests": "write", "issues": "write", "actions": "read", "metadata": "read"}}}},
		repos, "git", time.Now, io.Discard)
	e := &contractEnv{api: api, app: github.App{ID: "12345", Key: key}, plain: newContractClient(handlerTransport{api}),
		since: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)}
	ctx := context.Background()
	mint := func(p github.Permissions) *github.Token {
		tok, err := e.plain.CreateToken(ctx, e.jwt(), 77, "app", p)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	e.tok = mint(github.Permissions{"contents": "write", "pull_requests": "write", "issues": "write", "actions": "read"})
	e.spare = mint(github.Permissions{"contents": "read"})
	api.SetCollaborator("octo", "app", githubfake.Collaborator{Login: "bob", Role: githubfake.RoleMaintain})
	if e.issue, err = api.OpenIssue("octo", "app", "alice", "Fix the parser", "It breaks on tabs."); err != nil {
		t.Fatal(err)
	}
	if err := api.Label("octo", "app", e.issue, "bob", "agent-forge", true); err != nil {
		t.Fatal(err)
	}
	if e.comment, err = api.Comment("octo", "app", e.issue, "bob", "/forge also handle CRLF"); err != nil {
		t.Fatal(err)
	}
	mine, err := e.plain.CreateIssueComment(ctx, e.tok, "octo", "app", e.issue, "Accepted")
	if err != nil {
		t.Fatal(err)
	}
	e.mine = mine.ID
	pr, err := e.plain.CreatePull(ctx, e.tok, "octo", "app", "feature", "main", "Feature", "Fixes #"+fmt.Sprint(e.issue))
	if err != nil {
		t.Fatal(err)
	}
	e.pr, e.prHead = pr.Number, heads["feature"]
	mp, err := e.plain.CreatePull(ctx, e.tok, "octo", "app", "merge-me", "main", "Merge me", "")
	if err != nil {
		t.Fatal(err)
	}
	e.mergePR, e.mergeSHA = mp.Number, heads["merge-me"]
	if e.review, err = api.ReviewComment("octo", "app", e.pr, "bob", "README", 2, "/forge say it louder"); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Review("octo", "app", e.pr, "carol", "APPROVED", "", ""); err != nil {
		t.Fatal(err)
	}
	return e, api
}

// TestGitHubContract checks every request of every Client method against
// GitHub's pinned OpenAPI description (see the top of this file).
func TestGitHubContract(t *testing.T) {
	spec := loadOpenAPI(t)
	env, handler := newContractEnv(t)
	drivers := map[string]driver{}
	for _, d := range contractDrivers {
		drivers[d.method] = d
	}
	clientType := reflect.TypeOf(&github.Client{})
	var methods []string
	for i := 0; i < clientType.NumMethod(); i++ {
		methods = append(methods, clientType.Method(i).Name)
	}
	for name := range drivers {
		if _, ok := clientType.MethodByName(name); !ok {
			t.Errorf("contractDrivers names %s, which Client no longer has", name)
		}
	}
	// Explicit drivers first, in their order (state they change is what
	// later ones read), then any method without one.
	order := make([]string, 0, len(methods))
	for _, d := range contractDrivers {
		order = append(order, d.method)
	}
	params := clientParams(t)
	for _, m := range methods {
		if _, ok := drivers[m]; !ok {
			d, err := synthesize(m, clientType, params[m])
			if err != nil {
				t.Errorf("Client.%s: %v: add a driver to contractDrivers", m, err)
				continue
			}
			drivers[m] = d
			order = append(order, m)
		}
	}
	ops := map[string]bool{}
	requests, examples := 0, 0
	for _, name := range order {
		d := drivers[name]
		t.Run(name, func(t *testing.T) {
			rec := &recording{next: handlerTransport{handler}}
			callErr := d.call(context.Background(), newContractClient(rec), env)
			if callErr != nil {
				t.Errorf("against the fake: %v", callErr)
			}
			if len(rec.log) == 0 {
				t.Fatal("sent no request")
			}
			for i, x := range rec.log {
				requests++
				op := checkRequest(t, spec, x)
				if op == nil || callErr != nil {
					continue
				}
				ops[strings.ToUpper(op.method)+" "+op.path] = true
				media := checkAnswer(t, spec, op, x)
				if media == nil {
					continue
				}
				exs, err := spec.examples(media)
				if err != nil {
					t.Errorf("%s %s: %v", op.method, op.path, err)
					continue
				}
				names := make([]string, 0, len(exs))
				for n := range exs {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					examples++
					var got any
					if json.Unmarshal(x.respBody, &got) != nil {
						t.Errorf("%s %s: the fake's answer is not JSON", op.method, op.path)
						continue
					}
					body, _ := json.Marshal(align(exs[n], got))
					rp := &replay{rec: rec.log, target: i, body: body}
					err := d.call(context.Background(), newContractClient(rp), env)
					if err != nil && (d.accept == nil || !d.accept(err)) {
						t.Errorf("%s %s: GitHub's example %q (status %d) is refused by the client: %v", op.method, op.path, n, x.status, err)
					}
					for _, y := range rp.seen {
						checkRequest(t, spec, y)
					}
				}
			}
		})
	}
	list := make([]string, 0, len(ops))
	for op := range ops {
		list = append(list, op)
	}
	sort.Strings(list)
	t.Logf("%d Client methods, %d requests, %d operations, %d examples replayed:\n%s", len(methods), requests, len(list), examples, strings.Join(list, "\n"))
}

// checkRequest finds x's operation and checks its query and body.
func checkRequest(t *testing.T, spec *openapi, x *exchange) *operation {
	t.Helper()
	op, _, err := spec.find(x.method, x.path)
	if err != nil {
		t.Error(err)
		return nil
	}
	errs := spec.checkQuery(op, x.query)
	errs = append(errs, spec.checkBody(op, x.body, x.header.Get("Content-Type"))...)
	if x.header.Get("Accept") != "application/vnd.github+json" || x.header.Get("X-GitHub-Api-Version") == "" {
		errs = append(errs, "without GitHub's Accept and X-GitHub-Api-Version headers")
	}
	for _, e := range errs {
		t.Errorf("%s %s (%s): %s", x.method, op.path, op.id, e)
	}
	return op
}

// checkAnswer checks the fake's answer against the operation's documented
// responses; it returns the answer's media object when it has examples or
// a schema (nil otherwise).
func checkAnswer(t *testing.T, spec *openapi, op *operation, x *exchange) map[string]any {
	t.Helper()
	r, err := spec.response(op, x.status)
	if err != nil {
		t.Errorf("%s %s: %v", op.method, op.path, err)
		return nil
	}
	if r == nil {
		if x.status == http.StatusNotModified && x.header.Get("If-None-Match") != "" {
			return nil // GitHub answers any conditional request so
		}
		t.Errorf("%s %s: the fake answered %d, which the operation does not document", op.method, op.path, x.status)
		return nil
	}
	media, ok := spec.responseMedia(r)
	if !ok {
		if len(bytes.TrimSpace(x.respBody)) > 0 && x.status == http.StatusNoContent {
			t.Errorf("%s %s: a body with 204", op.method, op.path)
		}
		return nil
	}
	var v any
	if err := json.Unmarshal(x.respBody, &v); err != nil {
		t.Errorf("%s %s: the fake's %d is not JSON", op.method, op.path, x.status)
		return nil
	}
	if list, ok := v.([]any); ok && len(list) == 0 {
		t.Errorf("%s %s: the fixture gives an empty list, so no example can be aligned with it", op.method, op.path)
	}
	for _, e := range spec.validate(media["schema"], v, "response", false) {
		t.Errorf("%s %s (%s): the fake's answer: %s", op.method, op.path, op.id, e)
	}
	return media
}

// align is GitHub's example ex with the fake's answer got laid over it
// where both hold a value of the same kind (so the example's numbers,
// URLs and names become the request's), the example's nulls and
// differently typed values kept (what the client must cope with), and the
// fake's fields the example lacks added. List items take the fake's first
// items in turn.
func align(ex, got any) any {
	switch e := ex.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return ex
		}
		out := map[string]any{}
		for k, v := range g {
			out[k] = v
		}
		for k, v := range e {
			if gv, ok := g[k]; ok {
				out[k] = align(v, gv)
			} else {
				out[k] = v
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) == 0 {
			return ex
		}
		out := make([]any, len(e))
		for i, v := range e {
			out[i] = align(v, g[i%len(g)])
		}
		return out
	case string, float64, bool:
		if reflect.TypeOf(got) == reflect.TypeOf(ex) {
			return got
		}
	}
	return ex
}

// clientParams reads the parameter names of Client's exported methods
// from pkg/github's source.
func clientParams(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); !ok || fmt.Sprint(star.X) != "Client" {
				continue
			}
			var names []string
			for _, p := range fn.Type.Params.List {
				for _, n := range p.Names {
					names = append(names, n.Name)
				}
			}
			out[fn.Name.Name] = names
		}
	}
	return out
}

// contractArg is the argument a method without a driver gets for a
// parameter of that name.
func contractArg(name string, e *contractEnv) (any, bool) {
	switch strings.ToLower(name) {
	case "ctx":
		return context.Background(), true
	case "token", "tok", "t":
		return e.tok, true
	case "app":
		return e.app, true
	case "jwt":
		return e.jwt(), true
	case "owner":
		return "octo", true
	case "repo":
		return "app", true
	case "number", "pr", "pull", "pullnumber":
		return e.pr, true
	case "issue", "issuenumber":
		return e.issue, true
	case "id", "commentid":
		return e.comment, true
	case "reviewcommentid":
		return e.review, true
	case "installationid":
		return int64(77), true
	case "branch", "head":
		return "feature", true
	case "base":
		return "main", true
	case "sha", "headsha", "commit", "commitid":
		return e.prHead, true
	case "etag":
		return "", true
	case "since":
		return e.since, true
	case "perpage":
		return github.FeedPerPage, true
	case "page":
		return 1, true
	case "login", "user", "username":
		return "bob", true
	case "title", "body", "text", "message":
		return "text from the contract test", true
	case "target":
		return github.ReactIssue, true
	case "content":
		return github.ReactionEyes, true
	case "perms", "permissions":
		return github.Permissions{github.PermContents: github.Read}, true
	case "path":
		return "README", true
	case "line":
		return 2, true
	}
	return nil, false
}

// synthesize makes a driver for a method from its parameters' names.
// Its call's error is not required to be nil (the arguments are
// guesses), but every request it makes meets the contract.
func synthesize(method string, clientType reflect.Type, names []string) (driver, error) {
	m, ok := clientType.MethodByName(method)
	if !ok || len(names) != m.Type.NumIn()-1 {
		return driver{}, fmt.Errorf("its parameters could not be read from the source")
	}
	return driver{method: method, call: func(ctx context.Context, c *github.Client, e *contractEnv) error {
		args := []reflect.Value{reflect.ValueOf(c)}
		for i, n := range names {
			v, ok := contractArg(n, e)
			want := m.Type.In(i + 1)
			if !ok || !reflect.TypeOf(v).ConvertibleTo(want) {
				return fmt.Errorf("no argument for parameter %s (%s)", n, want)
			}
			args = append(args, reflect.ValueOf(v).Convert(want))
		}
		m.Func.Call(args)
		return nil
	}}, nil
}

// TestFakeRoutesContract holds the fake's routes that no Client method
// calls yet (pkg/githubfake answers them for intake and iteration) to the
// same description: each request is an operation and each answer
// validates against its response schema.
func TestFakeRoutesContract(t *testing.T) {
	spec := loadOpenAPI(t)
	env, handler := newContractEnv(t)
	rec := &recording{next: handlerTransport{handler}}
	hc := &http.Client{Transport: rec}
	pr, issue := fmt.Sprint(env.pr), fmt.Sprint(env.issue)
	comment, review := fmt.Sprint(env.comment), fmt.Sprint(env.review)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/repos/octo/app/issues/" + issue + "/timeline", ""},
		{"GET", "/repos/octo/app/issues/" + pr + "/timeline", ""},
		{"GET", "/repos/octo/app/issues/events?per_page=50", ""},
		{"GET", "/repos/octo/app/issues/" + issue + "/labels", ""},
		{"POST", "/repos/octo/app/issues/" + issue + "/labels", `{"labels":["triaged"]}`},
		{"DELETE", "/repos/octo/app/issues/" + issue + "/labels/triaged", ""},
		{"POST", "/repos/octo/app/issues/" + issue + "/reactions", `{"content":"rocket"}`},
		{"GET", "/repos/octo/app/issues/" + issue + "/reactions", ""},
		{"POST", "/repos/octo/app/issues/comments/" + comment + "/reactions", `{"content":"heart"}`},
		{"GET", "/repos/octo/app/issues/comments/" + comment + "/reactions?content=heart", ""},
		{"GET", "/repos/octo/app/issues/comments/" + comment, ""},
		{"GET", "/repos/octo/app/issues/" + issue + "/comments?since=" + env.since.Format(time.RFC3339), ""},
		{"GET", "/repos/octo/app/pulls/" + pr + "/comments", ""},
		{"GET", "/repos/octo/app/pulls/comments/" + review, ""},
		{"POST", "/repos/octo/app/pulls/comments/" + review + "/reactions", `{"content":"eyes"}`},
		{"GET", "/repos/octo/app/pulls/comments/" + review + "/reactions", ""},
		{"POST", "/repos/octo/app/pulls/" + pr + "/reviews", `{"event":"COMMENT","body":"looked at it"}`},
		{"GET", "/repos/octo/app/pulls/" + pr + "/reviews", ""},
	} {
		var body io.Reader
		if r.body != "" {
			body = strings.NewReader(r.body)
		}
		req, _ := http.NewRequest(r.method, github.APIBase+r.path, body)
		req.Header.Set("Authorization", "Bearer "+env.tok.Value())
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Errorf("%s %s: %d", r.method, r.path, resp.StatusCode)
		}
	}
	for _, x := range rec.log {
		if op := checkRequest(t, spec, x); op != nil {
			checkAnswer(t, spec, op, x)
		}
	}
}

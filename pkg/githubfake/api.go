package githubfake

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AppConfig describes the fake's one GitHub App and its installations.
type AppConfig struct {
	AppID         int64
	ClientID      string
	PublicKey     *rsa.PublicKey
	Installations []InstallationConfig
	// PublicRepositories ("owner/repo") may be cloned and fetched without
	// credentials, like public repositories on GitHub.
	PublicRepositories []string
	// RunsWindow is the window of every rate limit (60 requests an hour
	// unauthenticated, 5,000 per installation and for the App); zero
	// means GitHub's hour. A shorter one lets e2e scripts and benchmarks
	// scale time and keep GitHub's ratios.
	RunsWindow time.Duration
	// PushLog, when set, is the file the pre-receive hook appends each
	// accepted push's object count to.
	PushLog string
	// Slug is the App's slug (default agent-forge): GET /app answers it,
	// and what the App writes on issues is by its bot, <slug>[bot].
	Slug string
}

// InstallationConfig is one installation: an account, the repositories
// it may reach and the permissions it holds.
type InstallationConfig struct {
	ID           int64             `json:"id"`
	Owner        string            `json:"owner"`
	Repositories []string          `json:"repositories"`
	Permissions  map[string]string `json:"permissions"`
}

// Rate-limit figures the fake reports on every API response.
const (
	rateLimit     = 5000
	tokenLifetime = time.Hour
	maxAPIBody    = 1 << 20
)

// API answers api.github.com for the App in AppConfig: installation
// lookup, installation tokens (minted, checked and revoked), pull
// requests on repositories served by the Server's git side, and their
// issues, labels, events, comments, reviews and reactions with the
// people who act on them (api_issues.go, issues_people.go). Plug it into
// Server.API and call Attach to wire git authentication and the control
// routes.
type API struct {
	cfg     AppConfig
	gitRoot string
	git     string
	now     func() time.Time
	// TokenLog, when set, receives every minted token value, one per
	// line, so that a test can grep other files for it.
	tokenLog io.Writer

	mergeMu   sync.Mutex // serializes PersonAct's merges
	mu        sync.Mutex
	merging   map[string]bool // "owner/repo#n" being merged (api_delivery.go)
	wfChanges map[string]bool // "owner/repo sha" -> the head changes workflows
	installs  map[int64]*InstallationConfig
	tokens    map[string]*liveToken
	pulls     map[string][]*pull // "owner/repo" (lowercase) -> PRs
	nextPR    int
	used      int
	resetAt   time.Time
	apiFaults map[string]int // fault -> how many requests it still hits
	protected map[string][]string
	budgets   map[string]*budget  // rate-limit budget name -> use
	overLimit int                 // requests refused because their budget was spent
	trackers  map[string]*tracker // repoKey -> issues, comments, reviews (api_issues.go)
	accounts  map[string]*account // lowercase login -> account
	nextID    int64

	ciOnce sync.Once
	ciSt   *ciState // api_delivery.go
}

// API fault modes (see SetAPIFault).
const (
	// APIFaultLosePRCreate: the next PR creation is carried out, then the
	// connection is dropped before any answer.
	APIFaultLosePRCreate = "lose-pr-create"
	// APIFaultServerError: requests answer 502 without acting.
	APIFaultServerError = "server-error"
	// APIFaultSecondaryRetryAfter: mutations answer 403 secondary rate
	// limit with retry-after: 1.
	APIFaultSecondaryRetryAfter = "secondary-retry-after"
	// APIFaultSecondary: mutations answer 403 secondary rate limit
	// without retry-after.
	APIFaultSecondary = "secondary"
	// APIFaultPrimary: requests answer 403 with x-ratelimit-remaining 0
	// and a reset one second ahead.
	APIFaultPrimary = "primary"
)

type liveToken struct {
	installation int64
	owner        string
	repos        map[string]bool // lowercase names
	perms        map[string]string
	expires      time.Time
}

func (t *liveToken) covers(owner, repo string) bool {
	return strings.EqualFold(owner, t.owner) && t.repos[strings.ToLower(repo)]
}

// NewAPI returns the API for cfg over the bare repositories under
// gitRoot (read with the git executable git), reading time from now.
func NewAPI(cfg AppConfig, gitRoot, git string, now func() time.Time, tokenLog io.Writer) *API {
	a := &API{cfg: cfg, gitRoot: gitRoot, git: git, now: now, tokenLog: tokenLog,
		installs: map[int64]*InstallationConfig{}, tokens: map[string]*liveToken{},
		pulls: map[string][]*pull{}, apiFaults: map[string]int{}, protected: map[string][]string{}, budgets: map[string]*budget{},
		merging: map[string]bool{}, wfChanges: map[string]bool{}, trackers: map[string]*tracker{}, accounts: map[string]*account{}}
	for i := range cfg.Installations {
		in := cfg.Installations[i]
		a.installs[in.ID] = &in
	}
	return a
}

// Attach makes a serve api.github.com, authenticate github.com with
// installation tokens (username x-access-token, the token as password;
// pushing needs contents: write) and installs the control routes
// POST /api-fault {"mode","count"} and POST /installation
// {"id","permissions"}.
func (a *API) Attach(s *Server) {
	s.API = a
	s.Auth = a.gitAuth
	s.GitEnv = a.gitEnv
	s.Control.HandleFunc("POST /api-fault", a.handleAPIFault)
	s.Control.HandleFunc("POST /installation", a.handleSetPermissions)
	s.OnPush = a.onPush
	a.attachDelivery(s)
	a.attachPeople(s)
}

// SetAPIFault makes the next count matching API requests fail with mode.
func (a *API) SetAPIFault(mode string, count int) error {
	switch mode {
	case APIFaultLosePRCreate, APIFaultServerError, APIFaultSecondaryRetryAfter, APIFaultSecondary, APIFaultPrimary:
	default:
		return fmt.Errorf("unknown API fault %q", mode)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.apiFaults[mode] = count
	return nil
}

// SetPermissions replaces what installation id holds.
func (a *API) SetPermissions(id int64, perms map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	in, ok := a.installs[id]
	if !ok {
		return fmt.Errorf("no installation %d", id)
	}
	in.Permissions = perms
	return nil
}

func (a *API) handleAPIFault(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Mode  string `json:"mode"`
		Count int    `json:"count"`
	}
	if decodeControl(w, r, &req) && a.SetAPIFault(req.Mode, req.Count) == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Error(w, "bad api-fault request", http.StatusBadRequest)
}

func (a *API) handleSetPermissions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID          int64             `json:"id"`
		Permissions map[string]string `json:"permissions"`
	}
	if decodeControl(w, r, &req) && a.SetPermissions(req.ID, req.Permissions) == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Error(w, "bad installation request", http.StatusBadRequest)
}

func decodeControl(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil
}

// takeFault consumes one hit of mode if it is armed.
func (a *API) takeFault(mode string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.apiFaults[mode] > 0 {
		a.apiFaults[mode]--
		return true
	}
	return false
}

// budget is one rate-limit budget: the requests used in the current
// window, which ends at reset.
type budget struct {
	used  int
	reset time.Time
}

// Budgets: each installation's, the App's (JWT requests) and the
// address's (unauthenticated requests), as GitHub keeps them.
const (
	budgetApp = "app"
	budgetIP  = "ip"
)

// window is the length of every rate-limit window.
func (a *API) window() time.Duration {
	if a.cfg.RunsWindow > 0 {
		return a.cfg.RunsWindow
	}
	return time.Hour
}

// bucket names the budget r spends from and its limit: a live
// installation token's installation, the App for a JWT, else the
// address (60).
func (a *API) bucket(r *http.Request) (string, int) {
	cred := bearer(r)
	if cred == "" {
		return budgetIP, unauthLimit
	}
	if t := a.lookupToken(cred); t != nil {
		return "installation:" + strconv.FormatInt(t.installation, 10), rateLimit
	}
	if strings.Count(cred, ".") == 2 {
		return budgetApp, rateLimit
	}
	return budgetIP, unauthLimit
}

// spend counts one request on budget name unless free (a 304 to an
// authorized conditional request), and sets GitHub's x-ratelimit-*
// headers. over reports a request past the limit: it is refused, and
// counted in OverLimit.
func (a *API) spend(w http.ResponseWriter, name string, limit int, free bool) (over bool) {
	a.mu.Lock()
	now := a.now()
	b := a.budgets[name]
	if b == nil || !b.reset.After(now) {
		b = &budget{reset: now.Add(a.window())}
		a.budgets[name] = b
	}
	over = b.used >= limit
	if over {
		a.overLimit++
	} else if !free {
		b.used++
	}
	used, reset := b.used, b.reset
	a.mu.Unlock()
	rateHeaders(w, limit, used, reset)
	return over
}

// OverLimit is how many requests arrived after their budget was spent.
func (a *API) OverLimit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.overLimit
}

func rateHeaders(w http.ResponseWriter, limit, used int, reset time.Time) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(limit-used, 0)))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// limitExceeded is GitHub's answer to a request over its primary limit.
func limitExceeded(w http.ResponseWriter, name string) {
	w.Header().Set("X-RateLimit-Remaining", "0")
	if name == budgetIP {
		WriteError(w, http.StatusForbidden, "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit.)")
		return
	}
	WriteError(w, http.StatusForbidden, "API rate limit exceeded for installation. If you reach out to GitHub Support for help, please include the request ID.")
}

// ServeHTTP routes api.github.com.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mutation := r.Method != http.MethodGet && r.Method != http.MethodHead
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	w.Header().Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	name, limit := a.bucket(r)
	if a.serveIssues(w, r, name, limit) {
		return
	}
	if len(parts) == 5 && parts[0] == "repos" && parts[3] == "actions" && parts[4] == "runs" && r.Method == http.MethodGet {
		// Its own accounting: a 304 is free only when authorized.
		a.listRuns(w, r, parts[1], parts[2], name, limit)
		return
	}
	if len(parts) == 5 && parts[0] == "repos" && parts[3] == "pulls" && r.Method == http.MethodGet {
		a.getPull(w, r, parts[1], parts[2], parts[4], name, limit)
		return
	}
	primary := a.takeFault(APIFaultPrimary)
	over := a.spend(w, name, limit, false)
	switch {
	case primary:
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(a.now().Add(time.Second).Unix(), 10))
		WriteError(w, http.StatusForbidden, "API rate limit exceeded for installation. If you reach out to GitHub Support for help, please include the request ID.")
		return
	case over:
		limitExceeded(w, name)
		return
	case a.takeFault(APIFaultServerError):
		WriteError(w, http.StatusBadGateway, "Server Error")
		return
	case mutation && a.takeFault(APIFaultSecondaryRetryAfter):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return
	case mutation && a.takeFault(APIFaultSecondary):
		WriteError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return
	}
	switch {
	case len(parts) == 1 && parts[0] == "app" && r.Method == http.MethodGet:
		a.getApp(w, r)
	case len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation" && r.Method == http.MethodGet:
		a.getInstallation(w, r, parts[1], parts[2])
	case len(parts) == 4 && parts[0] == "app" && parts[1] == "installations" && parts[3] == "access_tokens" && r.Method == http.MethodPost:
		a.createToken(w, r, parts[2])
	case len(parts) == 2 && parts[0] == "installation" && parts[1] == "token" && r.Method == http.MethodDelete:
		a.revokeToken(w, r)
	case len(parts) == 4 && parts[0] == "repos" && parts[3] == "pulls" && r.Method == http.MethodGet:
		a.listPulls(w, r, parts[1], parts[2])
	case len(parts) == 4 && parts[0] == "repos" && parts[3] == "pulls" && r.Method == http.MethodPost:
		a.createPull(w, r, parts[1], parts[2])
	case a.serveDelivery(w, r, parts):
	default:
		WriteError(w, http.StatusNotFound, "Not Found")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// installationFor returns the installation that reaches owner/repo.
func (a *API) installationFor(owner, repo string) *InstallationConfig {
	for _, in := range a.installs {
		if !strings.EqualFold(in.Owner, owner) {
			continue
		}
		for _, r := range in.Repositories {
			if strings.EqualFold(r, repo) {
				return in
			}
		}
	}
	return nil
}

func (a *API) getInstallation(w http.ResponseWriter, r *http.Request, owner, repo string) {
	if !a.requireJWT(w, r) {
		return
	}
	a.mu.Lock()
	in := a.installationFor(owner, repo)
	var body map[string]any
	if in != nil {
		body = a.installationJSON(in)
	}
	a.mu.Unlock()
	if body == nil {
		WriteError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// getApp is GET /app with the App's JWT: the App itself, its slug and
// what its installations may hold.
func (a *API) getApp(w http.ResponseWriter, r *http.Request) {
	if !a.requireJWT(w, r) {
		return
	}
	a.mu.Lock()
	owner := a.accountLocked("octo-apps")
	a.mu.Unlock()
	created := stamp(time.Unix(1500000000, 0))
	writeJSON(w, http.StatusOK, map[string]any{"id": a.cfg.AppID, "slug": a.slug(), "node_id": nodeID("A", a.cfg.AppID),
		"client_id": a.cfg.ClientID, "owner": userJSON(owner), "name": a.slug(), "description": nil,
		"external_url": "https://github.com/apps/" + a.slug(), "html_url": "https://github.com/apps/" + a.slug(),
		"created_at": created, "updated_at": created,
		"permissions": map[string]string{"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"},
		"events":      []string{}})
}

func copyPerms(p map[string]string) map[string]string {
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// createToken mints an installation token like GitHub: repositories by
// bare name within the installation, permissions no wider than the
// installation's (422 otherwise), all of them when permissions is absent.
func (a *API) createToken(w http.ResponseWriter, r *http.Request, idText string) {
	if !a.requireJWT(w, r) {
		return
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	a.mu.Lock()
	in := a.installs[id]
	a.mu.Unlock()
	if err != nil || in == nil {
		WriteError(w, http.StatusNotFound, "Not Found")
		return
	}
	var req struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxAPIBody)).Decode(&req); err != nil {
		WriteError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	held := in.Permissions
	perms := req.Permissions
	if perms == nil {
		perms = copyPerms(held)
	}
	for name, level := range perms {
		if name == "workflows" && level != "write" {
			writeValidation(w, "The permissions requested are not valid: workflows only accepts write.")
			return
		}
		if level != "read" && level != "write" {
			writeValidation(w, "The permissions requested are not valid.")
			return
		}
		h, ok := held[name]
		if !ok {
			writeValidation(w, "The permissions requested are not granted to this installation.")
			return
		}
		if !allows(h, level) {
			writeValidation(w, "The permission level requested is higher than the one granted to this installation.")
			return
		}
	}
	repos := map[string]bool{}
	var listed []map[string]any
	names := req.Repositories
	if names == nil {
		names = in.Repositories
	}
	for _, name := range names {
		known := ""
		for _, r := range in.Repositories {
			if strings.EqualFold(r, name) {
				known = r
			}
		}
		if known == "" || strings.Contains(name, "/") {
			writeValidation(w, "There is at least one repository that does not exist or is not accessible to the parent installation.")
			return
		}
		repos[strings.ToLower(known)] = true
		listed = append(listed, a.repoJSON(in.Owner, known))
	}
	// Like GitHub, every token that reaches a repository also carries
	// the read-only metadata permission, requested or not.
	perms = copyPerms(perms)
	if _, ok := perms["metadata"]; !ok && len(repos) > 0 {
		perms["metadata"] = "read"
	}
	value := newTokenValue()
	exp := a.now().Add(tokenLifetime)
	a.tokens[value] = &liveToken{installation: in.ID, owner: in.Owner, repos: repos, perms: copyPerms(perms), expires: exp}
	if a.tokenLog != nil {
		fmt.Fprintln(a.tokenLog, value)
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": value, "expires_at": exp.UTC().Format(time.RFC3339),
		"permissions": perms, "repository_selection": "selected", "repositories": listed})
}

func writeValidation(w http.ResponseWriter, message string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": message,
		"documentation_url": "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app", "status": "422"})
}

// newTokenValue is a fresh installation-token-shaped secret.
func newTokenValue() string {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("githubfake: no randomness")
	}
	return "ghs_" + hex.EncodeToString(b[:])[:36]
}

// lookupToken returns the live (unrevoked, unexpired) token for value.
func (a *API) lookupToken(value string) *liveToken {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tokens[value]
	if t == nil || !a.now().Before(t.expires) {
		return nil
	}
	return t
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) {
	value := bearer(r)
	if a.lookupToken(value) == nil {
		WriteError(w, http.StatusUnauthorized, msgBadCredentials)
		return
	}
	a.mu.Lock()
	delete(a.tokens, value)
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// gitAuth: github.com takes x-access-token basic auth with a live token
// covering the repository; reading needs contents read, pushing write.
func (a *API) gitAuth(r *http.Request, owner, repo string, push bool) int {
	if _, _, creds := r.BasicAuth(); !push && !creds && a.public(owner, repo) {
		return 0
	}
	t := a.gitToken(r)
	if t == nil {
		return http.StatusUnauthorized
	}
	want := "read"
	if push {
		want = "write"
	}
	if !t.covers(owner, repo) || !allows(t.perms["contents"], want) {
		return http.StatusForbidden
	}
	return 0
}

func (a *API) gitToken(r *http.Request) *liveToken {
	user, pass, ok := r.BasicAuth()
	if !ok || user != "x-access-token" {
		return nil
	}
	return a.lookupToken(pass)
}

// public reports whether owner/repo is one of the public repositories.
func (a *API) public(owner, repo string) bool {
	for _, p := range a.cfg.PublicRepositories {
		if strings.EqualFold(p, owner+"/"+repo) {
			return true
		}
	}
	return false
}

// Variables the pre-receive hook written by WriteWorkflowHook reads.
const (
	// WorkflowsEnv: "write" when the pusher holds workflows: write.
	WorkflowsEnv = "FAKE_GITHUB_WORKFLOWS"
	// ProtectedEnv: space-separated glob patterns of the branches a
	// ruleset forbids the App to create or update.
	ProtectedEnv = "FAKE_GITHUB_PROTECTED"
	// PushLogEnv: a file the hook appends "<repo dir> <ref> <objects>" to
	// for every accepted push: how many objects the pack carried.
	PushLogEnv = "FAKE_GITHUB_PUSH_LOG"
)

func (a *API) gitEnv(r *http.Request, owner, repo string, push bool) []string {
	level := ""
	if t := a.gitToken(r); t != nil {
		level = t.perms["workflows"]
	}
	a.mu.Lock()
	protected := strings.Join(a.protected[repoKey(owner, repo)], " ")
	a.mu.Unlock()
	return []string{WorkflowsEnv + "=" + level, ProtectedEnv + "=" + protected, PushLogEnv + "=" + a.cfg.PushLog}
}

// SetProtected makes a ruleset of owner/repo refuse the App's pushes to
// branches matching any of patterns (shell globs, "forge/*"), as GitHub
// does with GH013 in the push's output.
func (a *API) SetProtected(owner, repo string, patterns []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.protected[repoKey(owner, repo)] = append([]string(nil), patterns...)
}

// prereceiveHook is GitHub's server-side checks for a push: a ruleset's
// refusal of protected branches (GH013, "push declined due to repository
// rule violations"), then, like GitHub, any pushed commit that creates or
// changes a file under .github/workflows/ is refused unless the pusher
// holds workflows: write. An accepted push logs how many objects its pack
// carried (loose objects and packs of the quarantine).
func prereceiveHook() string {
	return `#!/bin/sh
refs=$(cat)
printf '%s\n' "$refs" | while read -r old new ref; do
  [ -n "$ref" ] || continue
  b=${ref#refs/heads/}
  for p in $` + ProtectedEnv + `; do
    case $b in $p)
      printf 'error: GH013: Repository rule violations found for %s.\n- Cannot create ref due to creations being restricted.\n' "$ref" >&2
      exit 1 ;;
    esac
  done
done || exit 1
if [ "$` + WorkflowsEnv + `" != write ]; then
  printf '%s\n' "$refs" | while read -r old new ref; do
    case $new in 0000000000000000000000000000000000000000|'') continue ;; esac
    for c in $(git rev-list "$new" --not --all); do
      f=$(git diff-tree --no-commit-id -r --name-only --root "$c" | grep -m1 '^\.github/workflows/')
      if [ -n "$f" ]; then
        printf 'refusing to allow a GitHub App to create or update workflow ` + "`%s`" + ` without ` + "`workflows`" + ` permission\n' "$f" >&2
        exit 1
      fi
    done
  done || exit 1
fi
if [ -n "$` + PushLogEnv + `" ] && [ -n "$GIT_QUARANTINE_PATH" ]; then
  n=$(find "$GIT_QUARANTINE_PATH" -type f -path '*/[0-9a-f][0-9a-f]/*' | wc -l)
  for idx in "$GIT_QUARANTINE_PATH"/pack/*.idx; do
    [ -f "$idx" ] && n=$((n + $(git show-index <"$idx" | wc -l)))
  done
  printf '%s\n' "$refs" | while read -r old new ref; do
    [ -n "$ref" ] && printf '%s %s %s\n' "$PWD" "$ref" "$n" >>"$` + PushLogEnv + `"
  done
fi
exit 0
`
}

// WriteWorkflowHook installs GitHub's push checks (prereceiveHook) as the
// pre-receive hook of the bare repository dir.
func WriteWorkflowHook(dir string) error {
	hooks := filepath.Join(dir, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(hooks, "pre-receive"), []byte(prereceiveHook()), 0o755)
}

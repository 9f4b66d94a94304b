package githubfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What intake and iteration read and write on GitHub (issues_people.go
// holds the people who act on them):
//
//   - issues: GET …/issues (repository-wide: state, labels, sort,
//     direction, since, per_page, page; pull requests are listed too, with
//     their pull_request key, as GitHub does) and GET …/issues/{n};
//   - labels: GET/POST …/issues/{n}/labels and DELETE
//     …/issues/{n}/labels/{name}, each change a labeled or unlabeled event
//     naming its actor;
//   - events: GET …/issues/{n}/events, GET …/issues/events (each with its
//     issue) and GET …/issues/{n}/timeline (events, comments, reviews);
//   - GET …/collaborators/{username}/permission: permission (admin, write,
//     read, none: maintain counts as write, triage as read) and role_name;
//   - issue comments: GET …/issues/comments (repository-wide, since, sort,
//     direction), GET/POST …/issues/{n}/comments, GET/PATCH
//     …/issues/comments/{id};
//   - review comments: GET …/pulls/comments (repository-wide, since),
//     GET …/pulls/{n}/comments, GET …/pulls/comments/{id}, each with its
//     path, line, side, commit and diff hunk;
//   - reactions: GET/POST …/issues/{n}/reactions,
//     …/issues/comments/{id}/reactions and …/pulls/comments/{id}/reactions
//     (201 new, 200 when the same user already reacted so);
//   - reviews: GET/POST …/pulls/{n}/reviews (state and commit_id);
//   - GET …/git/ref/heads/{branch}: a branch's commit.
//
// Every route needs an installation token that reaches the repository
// and holds the permission GitHub asks for (issues, or pull_requests for
// a pull request's conversation; metadata for the permission check). A
// request made with a token acts as the App's bot account,
// <slug>[bot]. Lists page as GitHub's do (per_page 30 by default, at
// most 100; a Link header with next, last, first and prev). Every 200 to
// a GET carries an ETag derived from the body and the credential (GitHub
// varies it by Authorization, so a new installation token never matches
// an old ETag); a matching If-None-Match answers 304, which spends
// nothing of the rate limit.

// Bounds GitHub documents or enforces.
const (
	maxCommentBytes = 65536 // GitHub refuses a longer body
	maxTitleBytes   = 256
	maxLabelBytes   = 50
	defaultPerPage  = 30
	maxPerPage      = 100
)

// tracker is one repository's issues side.
type tracker struct {
	issues   map[int]*issue
	labels   map[string]*label // lowercase name
	events   []*issueEvent
	comments []*comment
	reviewC  []*reviewComment
	reviews  []*review
	collab   map[string]Collaborator // lowercase login
}

type account struct {
	Login string
	ID    int64
	Bot   bool
}

type issue struct {
	Number      int
	Title       string
	Body        string
	User        *account
	State       string // open | closed (a pull request's is its pull's)
	StateReason string
	Labels      []*label
	Created     time.Time
	Updated     time.Time
	Closed      time.Time
	ClosedBy    *account
	Pull        *pull // set for a pull request
	Reactions   []*reaction
}

type label struct {
	ID    int64
	Name  string
	Color string
}

type issueEvent struct {
	ID          int64
	Number      int
	Event       string // labeled, unlabeled, closed, reopened, merged, renamed
	Actor       *account
	Label       *label
	CommitID    string
	StateReason string
	Created     time.Time
}

type comment struct {
	ID        int64
	Number    int
	User      *account
	Body      string
	Created   time.Time
	Updated   time.Time
	Reactions []*reaction
}

type reviewComment struct {
	ID        int64
	Pull      int
	Review    int64
	User      *account
	Body      string
	Path      string
	Line      int
	DiffHunk  string
	CommitID  string
	Created   time.Time
	Updated   time.Time
	Reactions []*reaction
}

type review struct {
	ID        int64
	Pull      int
	User      *account
	Body      string
	State     string // APPROVED, CHANGES_REQUESTED, COMMENTED
	CommitID  string
	Submitted time.Time
}

type reaction struct {
	ID      int64
	User    *account
	Content string
	Created time.Time
}

// reactionContents are GitHub's reaction types.
var reactionContents = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

// trackerLocked returns owner/repo's tracker, made on first use. a.mu held.
func (a *API) trackerLocked(owner, repo string) *tracker {
	key := repoKey(owner, repo)
	t := a.trackers[key]
	if t == nil {
		t = &tracker{issues: map[int]*issue{}, labels: map[string]*label{}, collab: map[string]Collaborator{}}
		a.trackers[key] = t
	}
	return t
}

// accountLocked returns login's account, made on first mention; a login
// ending in [bot] is a bot. a.mu held.
func (a *API) accountLocked(login string) *account {
	key := strings.ToLower(login)
	u := a.accounts[key]
	if u == nil {
		a.nextID++
		u = &account{Login: login, ID: 5000 + a.nextID, Bot: strings.HasSuffix(login, "[bot]")}
		a.accounts[key] = u
	}
	return u
}

// BotLogin is the App's bot account: its slug followed by [bot].
func (a *API) BotLogin() string { return a.slug() + "[bot]" }

func (a *API) slug() string {
	if a.cfg.Slug != "" {
		return a.cfg.Slug
	}
	return "agent-forge"
}

func (a *API) newIDLocked() int64 {
	a.nextID++
	return 9000 + a.nextID
}

// labelLocked returns the repository's label name, made (grey) when new,
// as adding an unknown label to an issue does on GitHub.
func (t *tracker) labelLocked(a *API, name string) *label {
	l := t.labels[strings.ToLower(name)]
	if l == nil {
		l = &label{ID: a.newIDLocked(), Name: name, Color: "ededed"}
		t.labels[strings.ToLower(name)] = l
	}
	return l
}

// stamp is GitHub's timestamp: UTC, whole seconds.
func stamp(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

func nullStamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return stamp(t)
}

func nodeID(kind string, id int64) string { return kind + "_kwDOfake" + strconv.FormatInt(id, 36) }

const apiRoot = "https://api.github.com"

func userJSON(u *account) map[string]any {
	api := apiRoot + "/users/" + url.PathEscape(u.Login)
	typ, html := "User", "https://github.com/"+u.Login
	if u.Bot {
		typ, html = "Bot", "https://github.com/apps/"+strings.TrimSuffix(u.Login, "[bot]")
	}
	return map[string]any{"login": u.Login, "id": u.ID, "node_id": nodeID("U", u.ID),
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(u.ID, 10) + "?v=4", "gravatar_id": "",
		"url": api, "html_url": html, "followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
		"gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
		"subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs", "repos_url": api + "/repos",
		"events_url": api + "/events{/privacy}", "received_events_url": api + "/received_events",
		"type": typ, "site_admin": false, "user_view_type": "public"}
}

// association is GitHub's author_association of u on owner/repo.
func (t *tracker) association(owner string, u *account) string {
	switch _, ok := t.collab[strings.ToLower(u.Login)]; {
	case strings.EqualFold(u.Login, owner):
		return "OWNER"
	case ok:
		return "COLLABORATOR"
	}
	return "NONE"
}

func reactionsJSON(u string, rs []*reaction) map[string]any {
	out := map[string]any{"url": u + "/reactions", "total_count": len(rs)}
	for _, c := range reactionContents {
		out[c] = 0
	}
	for _, r := range rs {
		out[r.Content] = out[r.Content].(int) + 1
	}
	return out
}

func repoAPI(owner, repo string) string { return apiRoot + "/repos/" + owner + "/" + repo }

func labelJSON(owner, repo string, l *label) map[string]any {
	return map[string]any{"id": l.ID, "node_id": nodeID("LA", l.ID), "url": repoAPI(owner, repo) + "/labels/" + url.PathEscape(l.Name),
		"name": l.Name, "description": nil, "color": l.Color, "default": false}
}

// issueJSON is GitHub's issue object; a pull request's carries the
// pull_request key and its pull's title, body and state. a.mu held.
func (a *API) issueJSON(owner, repo string, t *tracker, is *issue) map[string]any {
	api := repoAPI(owner, repo) + "/issues/" + strconv.Itoa(is.Number)
	html := "https://github.com/" + owner + "/" + repo + "/issues/" + strconv.Itoa(is.Number)
	title, body, state := is.Title, is.Body, is.State
	labels := []any{}
	for _, l := range is.Labels {
		labels = append(labels, labelJSON(owner, repo, l))
	}
	n := 0
	for _, c := range t.comments {
		if c.Number == is.Number {
			n++
		}
	}
	out := map[string]any{"id": int64(is.Number) + 700000, "node_id": nodeID("I", int64(is.Number)+700000), "url": api,
		"repository_url": repoAPI(owner, repo), "labels_url": api + "/labels{/name}", "comments_url": api + "/comments",
		"events_url": api + "/events", "timeline_url": api + "/timeline", "number": is.Number,
		"user": userJSON(is.User), "labels": labels, "assignee": nil, "assignees": []any{}, "milestone": nil,
		"locked": false, "active_lock_reason": nil, "comments": n, "created_at": stamp(is.Created),
		"updated_at": stamp(is.Updated), "closed_at": nullStamp(is.Closed), "author_association": t.association(owner, is.User),
		"reactions": reactionsJSON(api, is.Reactions), "performed_via_github_app": nil, "state_reason": nil, "closed_by": nil}
	if is.ClosedBy != nil {
		out["closed_by"] = userJSON(is.ClosedBy)
	}
	if is.StateReason != "" {
		out["state_reason"] = is.StateReason
	}
	if p := is.Pull; p != nil {
		title, body, state = p.Title, p.Body, p.State
		html = "https://github.com/" + owner + "/" + repo + "/pull/" + strconv.Itoa(is.Number)
		var merged any
		if p.Merged {
			merged = nullStamp(is.Closed)
		}
		out["pull_request"] = map[string]any{"url": repoAPI(owner, repo) + "/pulls/" + strconv.Itoa(is.Number),
			"html_url": html, "diff_url": html + ".diff", "patch_url": html + ".patch", "merged_at": merged}
		out["draft"] = false
	}
	out["html_url"], out["title"], out["state"] = html, title, state
	if body == "" {
		out["body"] = nil
	} else {
		out["body"] = body
	}
	return out
}

func (a *API) commentJSON(owner, repo string, t *tracker, c *comment) map[string]any {
	api := repoAPI(owner, repo) + "/issues/comments/" + strconv.FormatInt(c.ID, 10)
	kind := "/issues/"
	if is := t.issues[c.Number]; is != nil && is.Pull != nil {
		kind = "/pull/"
	}
	return map[string]any{"id": c.ID, "node_id": nodeID("IC", c.ID), "url": api,
		"html_url":  "https://github.com/" + owner + "/" + repo + kind + strconv.Itoa(c.Number) + "#issuecomment-" + strconv.FormatInt(c.ID, 10),
		"issue_url": repoAPI(owner, repo) + "/issues/" + strconv.Itoa(c.Number), "body": c.Body, "user": userJSON(c.User),
		"created_at": stamp(c.Created), "updated_at": stamp(c.Updated), "author_association": t.association(owner, c.User),
		"performed_via_github_app": nil, "reactions": reactionsJSON(api, c.Reactions)}
}

func (a *API) reviewCommentJSON(owner, repo string, t *tracker, c *reviewComment) map[string]any {
	api := repoAPI(owner, repo) + "/pulls/comments/" + strconv.FormatInt(c.ID, 10)
	pr := repoAPI(owner, repo) + "/pulls/" + strconv.Itoa(c.Pull)
	html := "https://github.com/" + owner + "/" + repo + "/pull/" + strconv.Itoa(c.Pull) + "#discussion_r" + strconv.FormatInt(c.ID, 10)
	return map[string]any{"url": api, "id": c.ID, "node_id": nodeID("PRRC", c.ID), "pull_request_review_id": c.Review,
		"diff_hunk": c.DiffHunk, "path": c.Path, "commit_id": c.CommitID, "original_commit_id": c.CommitID,
		"user": userJSON(c.User), "body": c.Body, "created_at": stamp(c.Created), "updated_at": stamp(c.Updated),
		"html_url": html, "pull_request_url": pr, "author_association": t.association(owner, c.User),
		"_links": map[string]any{"self": map[string]any{"href": api}, "html": map[string]any{"href": html},
			"pull_request": map[string]any{"href": pr}},
		"start_line": nil, "original_start_line": nil, "start_side": nil, "line": c.Line, "original_line": c.Line,
		"side": "RIGHT", "subject_type": "line", "reactions": reactionsJSON(api, c.Reactions)}
}

func (a *API) reviewJSON(owner, repo string, t *tracker, r *review) map[string]any {
	pr := repoAPI(owner, repo) + "/pulls/" + strconv.Itoa(r.Pull)
	html := "https://github.com/" + owner + "/" + repo + "/pull/" + strconv.Itoa(r.Pull) + "#pullrequestreview-" + strconv.FormatInt(r.ID, 10)
	return map[string]any{"id": r.ID, "node_id": nodeID("PRR", r.ID), "user": userJSON(r.User), "body": r.Body,
		"state": r.State, "html_url": html, "pull_request_url": pr,
		"_links":       map[string]any{"html": map[string]any{"href": html}, "pull_request": map[string]any{"href": pr}},
		"submitted_at": stamp(r.Submitted), "commit_id": r.CommitID, "author_association": t.association(owner, r.User)}
}

func reactionJSON(r *reaction) map[string]any {
	return map[string]any{"id": r.ID, "node_id": nodeID("REA", r.ID), "user": userJSON(r.User), "content": r.Content,
		"created_at": stamp(r.Created)}
}

func (a *API) eventJSON(owner, repo string, e *issueEvent) map[string]any {
	out := map[string]any{"id": e.ID, "node_id": nodeID("LE", e.ID), "url": repoAPI(owner, repo) + "/issues/events/" + strconv.FormatInt(e.ID, 10),
		"actor": userJSON(e.Actor), "event": e.Event, "commit_id": nil, "commit_url": nil, "created_at": stamp(e.Created),
		"performed_via_github_app": nil}
	if e.CommitID != "" {
		out["commit_id"], out["commit_url"] = e.CommitID, repoAPI(owner, repo)+"/commits/"+e.CommitID
	}
	if e.Label != nil {
		out["label"] = map[string]any{"name": e.Label.Name, "color": e.Label.Color}
	}
	if e.Event == "closed" || e.Event == "reopened" {
		out["state_reason"] = nil
		if e.StateReason != "" {
			out["state_reason"] = e.StateReason
		}
	}
	return out
}

// ireq is one request to an issues route.
type ireq struct {
	a           *API
	r           *http.Request
	owner, repo string
	t           *tracker
	tok         *liveToken
	me          *account // the App's bot
	args        []string // the route's {…} segments
	body        []byte
}

// reply is a route's answer: a JSON value, or an error message.
type reply struct {
	status int
	v      any
	link   string
	msg    string
}

func fail(status int, msg string) reply { return reply{status: status, msg: msg} }

var (
	notFound   = fail(http.StatusNotFound, "Not Found")
	forbidden  = fail(http.StatusForbidden, msgNotAccessible)
	badJSON    = fail(http.StatusBadRequest, "Problems parsing JSON")
	validation = fail(http.StatusUnprocessableEntity, "Validation Failed")
)

func (c *ireq) can(perm, level string) bool { return allows(c.tok.perms[perm], level) }

// canIssue: issues at level, or pull_requests for a pull request's
// conversation.
func (c *ireq) canIssue(is *issue, level string) bool {
	return c.can("issues", level) || is != nil && is.Pull != nil && c.can("pull_requests", level)
}

func (c *ireq) num(i int) int {
	n, err := strconv.Atoi(c.args[i])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func (c *ireq) id(i int) int64 {
	n, err := strconv.ParseInt(c.args[i], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// decode reads a JSON object body into v; false on anything else.
func (c *ireq) decode(v any) bool {
	return json.Unmarshal(c.body, v) == nil && strings.HasPrefix(strings.TrimSpace(string(c.body)), "{")
}

// paged cuts items to the request's page and names the others in a Link
// header, as GitHub does.
func (c *ireq) paged(items []any) reply {
	q := c.r.URL.Query()
	perPage, page := defaultPerPage, 1
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return validation
		}
		perPage = min(n, maxPerPage)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return validation
		}
		page = n
	}
	out := []any{}
	if start := (page - 1) * perPage; start < len(items) {
		out = items[start:min(len(items), start+perPage)]
	}
	last := max((len(items)+perPage-1)/perPage, 1)
	at := func(n int) string {
		u := *c.r.URL
		nq := u.Query()
		nq.Set("page", strconv.Itoa(n))
		u.RawQuery = nq.Encode()
		return "<" + apiRoot + u.RequestURI() + ">"
	}
	var links []string
	if page < last {
		links = append(links, at(page+1)+`; rel="next"`, at(last)+`; rel="last"`)
	}
	if page > 1 {
		links = append(links, at(1)+`; rel="first"`, at(min(page-1, last))+`; rel="prev"`)
	}
	return reply{status: http.StatusOK, v: out, link: strings.Join(links, ", ")}
}

// since reads the since parameter (ISO 8601); ok false when malformed.
func (c *ireq) since() (time.Time, bool) {
	v := c.r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// after reports whether updated is at or after since (GitHub compares
// whole seconds, and includes the second itself).
func after(updated, since time.Time) bool {
	return since.IsZero() || !updated.Truncate(time.Second).Before(since.Truncate(time.Second))
}

// sortOrder reads sort (one of sorts, the first the default) and
// direction (default desc, or asc when defaultAsc).
func (c *ireq) sortOrder(sorts []string, defaultAsc bool) (string, bool, bool) {
	q := c.r.URL.Query()
	s := q.Get("sort")
	if s == "" {
		s = sorts[0]
	}
	if !slices.Contains(sorts, s) {
		return "", false, false
	}
	asc := defaultAsc
	switch q.Get("direction") {
	case "":
	case "asc":
		asc = true
	case "desc":
		asc = false
	default:
		return "", false, false
	}
	return s, asc, true
}

type route struct {
	method  string
	pattern []string // after /repos/{owner}/{repo}/; {n} a number, {s} any segment
	h       func(*ireq) reply
}

var issueRoutes = []route{
	{"GET", []string{"issues"}, (*ireq).listIssues},
	{"GET", []string{"issues", "events"}, (*ireq).repoEvents},
	{"GET", []string{"issues", "comments"}, (*ireq).repoComments},
	{"GET", []string{"issues", "comments", "{n}"}, (*ireq).getComment},
	{"PATCH", []string{"issues", "comments", "{n}"}, (*ireq).updateComment},
	{"GET", []string{"issues", "comments", "{n}", "reactions"}, (*ireq).commentReactions},
	{"POST", []string{"issues", "comments", "{n}", "reactions"}, (*ireq).reactComment},
	{"GET", []string{"issues", "{n}"}, (*ireq).getIssue},
	{"GET", []string{"issues", "{n}", "events"}, (*ireq).issueEvents},
	{"GET", []string{"issues", "{n}", "timeline"}, (*ireq).timeline},
	{"GET", []string{"issues", "{n}", "labels"}, (*ireq).issueLabels},
	{"POST", []string{"issues", "{n}", "labels"}, (*ireq).addLabels},
	{"DELETE", []string{"issues", "{n}", "labels", "{s}"}, (*ireq).removeLabel},
	{"GET", []string{"issues", "{n}", "comments"}, (*ireq).issueComments},
	{"POST", []string{"issues", "{n}", "comments"}, (*ireq).createComment},
	{"GET", []string{"issues", "{n}", "reactions"}, (*ireq).issueReactions},
	{"POST", []string{"issues", "{n}", "reactions"}, (*ireq).reactIssue},
	{"GET", []string{"collaborators", "{s}", "permission"}, (*ireq).permission},
	{"GET", []string{"pulls", "comments"}, (*ireq).repoReviewComments},
	{"GET", []string{"pulls", "comments", "{n}"}, (*ireq).getReviewComment},
	{"GET", []string{"pulls", "comments", "{n}", "reactions"}, (*ireq).reviewCommentReactions},
	{"POST", []string{"pulls", "comments", "{n}", "reactions"}, (*ireq).reactReviewComment},
	{"GET", []string{"pulls", "{n}", "comments"}, (*ireq).pullReviewComments},
	{"GET", []string{"pulls", "{n}", "reviews"}, (*ireq).listReviews},
	{"POST", []string{"pulls", "{n}", "reviews"}, (*ireq).submitReview},
	{"GET", []string{"git", "ref", "heads", "{*}"}, (*ireq).branchRef},
}

func matchRoute(method string, segs []string) (*route, []string) {
	for i := range issueRoutes {
		rt := &issueRoutes[i]
		if n := len(rt.pattern); rt.method != method || len(segs) < n || len(segs) > n && rt.pattern[n-1] != "{*}" {
			continue
		}
		var args []string
		ok := true
		for j, p := range rt.pattern {
			switch p {
			case "{n}":
				if segs[j] == "" || strings.Trim(segs[j], "0123456789") != "" || len(segs[j]) > 18 {
					ok = false
				}
				args = append(args, segs[j])
			case "{s}":
				if segs[j] == "" {
					ok = false
				}
				args = append(args, segs[j])
			case "{*}": // the rest, one or more segments
				rest := strings.Join(segs[j:], "/")
				ok = ok && !slices.Contains(segs[j:], "")
				args = append(args, rest)
			default:
				ok = ok && p == segs[j]
			}
		}
		if ok {
			return rt, args
		}
	}
	return nil, nil
}

// serveIssues answers the issues routes; false when r is none of them.
func (a *API) serveIssues(w http.ResponseWriter, r *http.Request, name string, limit int) bool {
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	if len(raw) < 4 || raw[0] != "repos" {
		return false
	}
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return false
		}
		segs[i] = u
	}
	rt, args := matchRoute(r.Method, segs[3:])
	if rt == nil {
		return false
	}
	owner, repo := segs[1], segs[2]
	read := r.Method == http.MethodGet
	switch {
	case a.takeFault(APIFaultPrimary):
		a.spend(w, name, limit, false)
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(a.now().Add(time.Second).Unix(), 10))
		WriteError(w, http.StatusForbidden, "API rate limit exceeded for installation. If you reach out to GitHub Support for help, please include the request ID.")
		return true
	case !read && a.spend(w, name, limit, false):
		limitExceeded(w, name)
		return true
	case a.takeFault(APIFaultServerError):
		if read {
			a.spend(w, name, limit, false)
		}
		WriteError(w, http.StatusBadGateway, "Server Error")
		return true
	case !read && a.takeFault(APIFaultSecondaryRetryAfter):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return true
	case !read && a.takeFault(APIFaultSecondary):
		WriteError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return true
	}
	tok := a.lookupToken(bearer(r))
	var rep reply
	switch {
	case tok == nil:
		rep = fail(http.StatusUnauthorized, msgBadCredentials)
	case !validName(owner) || !validName(repo) || !tok.covers(owner, repo):
		rep = notFound
	default:
		c := &ireq{a: a, r: r, owner: owner, repo: repo, tok: tok, args: args}
		if !read {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody+1))
			if err != nil || len(b) > maxAPIBody {
				rep = fail(http.StatusRequestEntityTooLarge, "Request body too large")
				break
			}
			c.body = b
		}
		a.mu.Lock()
		c.t = a.trackerLocked(owner, repo)
		c.me = a.accountLocked(a.BotLogin())
		rep = rt.h(c)
		a.mu.Unlock()
	}
	var body []byte
	if rep.msg == "" {
		body, _ = json.Marshal(rep.v)
	}
	if read {
		notModified := false
		if rep.status == http.StatusOK {
			// GitHub's ETag varies with the credential (Vary:
			// Authorization): a rotated token never matches.
			sum := sha256.Sum256(append([]byte(bearer(r)+"\n"), body...))
			etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
			w.Header().Set("ETag", etag)
			w.Header().Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
			notModified = r.Header.Get("If-None-Match") == etag
		}
		if a.spend(w, name, limit, notModified && tok != nil) {
			limitExceeded(w, name)
			return true
		}
		if notModified {
			w.WriteHeader(http.StatusNotModified)
			return true
		}
	}
	if rep.link != "" {
		w.Header().Set("Link", rep.link)
	}
	if rep.msg != "" {
		WriteError(w, rep.status, rep.msg)
		return true
	}
	if rep.v == nil {
		w.WriteHeader(rep.status)
		return true
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(rep.status)
	w.Write(append(body, '\n'))
	return true
}

// byUpdated orders items by their time (then id), ascending or not.
func byUpdated[T any](items []T, key func(T) (time.Time, int64), asc bool) {
	slices.SortStableFunc(items, func(x, y T) int {
		tx, ix := key(x)
		ty, iy := key(y)
		c := tx.Compare(ty)
		if c == 0 {
			c = compareInt(ix, iy)
		}
		if !asc {
			c = -c
		}
		return c
	})
}

func compareInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func (c *ireq) listIssues() reply {
	if !c.can("issues", "read") {
		return forbidden
	}
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	sortBy, asc, ok := c.sortOrder([]string{"created", "updated", "comments"}, false)
	since, okSince := c.since()
	if !ok || !okSince || state != "open" && state != "closed" && state != "all" {
		return validation
	}
	var want []string
	if v := q.Get("labels"); v != "" {
		for _, l := range strings.Split(v, ",") {
			want = append(want, strings.ToLower(strings.TrimSpace(l)))
		}
	}
	var list []*issue
	for _, is := range c.t.issues {
		st := is.State
		if is.Pull != nil {
			st = is.Pull.State
		}
		if state != "all" && st != state || !after(is.Updated, since) {
			continue
		}
		has := true
		for _, l := range want {
			has = has && slices.ContainsFunc(is.Labels, func(x *label) bool { return strings.ToLower(x.Name) == l })
		}
		if has {
			list = append(list, is)
		}
	}
	counts := map[int]int{}
	for _, cm := range c.t.comments {
		counts[cm.Number]++
	}
	byUpdated(list, func(is *issue) (time.Time, int64) {
		switch sortBy {
		case "updated":
			return is.Updated, int64(is.Number)
		case "comments":
			return time.Unix(int64(counts[is.Number]), 0), int64(is.Number)
		}
		return is.Created, int64(is.Number)
	}, asc)
	items := make([]any, 0, len(list))
	for _, is := range list {
		items = append(items, c.a.issueJSON(c.owner, c.repo, c.t, is))
	}
	return c.paged(items)
}

func (c *ireq) issue(i int) *issue { return c.t.issues[c.num(i)] }

func (c *ireq) getIssue() reply {
	is := c.issue(0)
	if is == nil {
		if !c.can("issues", "read") {
			return forbidden
		}
		return notFound
	}
	if !c.canIssue(is, "read") {
		return forbidden
	}
	return reply{status: http.StatusOK, v: c.a.issueJSON(c.owner, c.repo, c.t, is)}
}

func (c *ireq) issueEvents() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "read") {
		return c.missing(is)
	}
	var items []any
	for _, e := range c.t.events {
		if e.Number == is.Number {
			items = append(items, c.a.eventJSON(c.owner, c.repo, e))
		}
	}
	return c.paged(items)
}

// missing is the answer for an issue (or comment) that is absent (404
// to a token that could read it) or not readable (403).
func (c *ireq) missing(is *issue) reply {
	if is == nil && (c.can("issues", "read") || c.can("pull_requests", "read")) {
		return notFound
	}
	return forbidden
}

func (c *ireq) repoEvents() reply {
	if !c.can("issues", "read") {
		return forbidden
	}
	events := slices.Clone(c.t.events)
	byUpdated(events, func(e *issueEvent) (time.Time, int64) { return e.Created, e.ID }, false)
	items := make([]any, 0, len(events))
	for _, e := range events {
		j := c.a.eventJSON(c.owner, c.repo, e)
		if is := c.t.issues[e.Number]; is != nil {
			j["issue"] = c.a.issueJSON(c.owner, c.repo, c.t, is)
		}
		items = append(items, j)
	}
	return c.paged(items)
}

// timeline is the issue's events, comments (commented) and, for a pull
// request, its reviews (reviewed), oldest first.
func (c *ireq) timeline() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "read") {
		return c.missing(is)
	}
	type entry struct {
		at time.Time
		id int64
		v  map[string]any
	}
	var all []entry
	for _, e := range c.t.events {
		if e.Number == is.Number {
			all = append(all, entry{e.Created, e.ID, c.a.eventJSON(c.owner, c.repo, e)})
		}
	}
	for _, cm := range c.t.comments {
		if cm.Number == is.Number {
			j := c.a.commentJSON(c.owner, c.repo, c.t, cm)
			j["event"], j["actor"] = "commented", userJSON(cm.User)
			all = append(all, entry{cm.Created, cm.ID, j})
		}
	}
	for _, r := range c.t.reviews {
		if r.Pull == is.Number {
			j := c.a.reviewJSON(c.owner, c.repo, c.t, r)
			j["event"] = "reviewed"
			all = append(all, entry{r.Submitted, r.ID, j})
		}
	}
	byUpdated(all, func(e entry) (time.Time, int64) { return e.at, e.id }, true)
	items := make([]any, 0, len(all))
	for _, e := range all {
		items = append(items, e.v)
	}
	return c.paged(items)
}

func (c *ireq) issueLabels() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "read") {
		return c.missing(is)
	}
	items := []any{}
	for _, l := range is.Labels {
		items = append(items, labelJSON(c.owner, c.repo, l))
	}
	return c.paged(items)
}

// addLabels is POST …/issues/{n}/labels {"labels":[…]} (or a bare array):
// the labels are added (made when new), each a labeled event by the App.
func (c *ireq) addLabels() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "write") {
		return c.missing(is)
	}
	var names []string
	var obj struct {
		Labels []string `json:"labels"`
	}
	if c.decode(&obj) {
		names = obj.Labels
	} else if json.Unmarshal(c.body, &names) != nil {
		return badJSON
	}
	if len(names) == 0 {
		return validation
	}
	for _, n := range names {
		if n == "" || len(n) > maxLabelBytes {
			return validation
		}
	}
	for _, n := range names {
		c.a.labelLocked(c.owner, c.repo, is, c.me, n, true)
	}
	return c.issueLabels()
}

func (c *ireq) removeLabel() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "write") {
		return c.missing(is)
	}
	if !c.a.labelLocked(c.owner, c.repo, is, c.me, c.args[1], false) {
		return fail(http.StatusNotFound, "Label does not exist")
	}
	return c.issueLabels()
}

// labelLocked adds (on) or removes label name on is as actor, with its
// event; false when there was nothing to change. a.mu held.
func (a *API) labelLocked(owner, repo string, is *issue, actor *account, name string, on bool) bool {
	t := a.trackerLocked(owner, repo)
	i := slices.IndexFunc(is.Labels, func(l *label) bool { return strings.EqualFold(l.Name, name) })
	if on == (i >= 0) {
		return false
	}
	now := a.now()
	var l *label
	if on {
		l = t.labelLocked(a, name)
		is.Labels = append(is.Labels, l)
	} else {
		l = is.Labels[i]
		is.Labels = slices.Delete(is.Labels, i, i+1)
	}
	ev := "unlabeled"
	if on {
		ev = "labeled"
	}
	t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: is.Number, Event: ev, Actor: actor, Label: l, Created: now})
	is.Updated = now
	return true
}

func (c *ireq) issueComments() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "read") {
		return c.missing(is)
	}
	since, ok := c.since()
	if !ok {
		return validation
	}
	var items []any
	for _, cm := range c.t.comments {
		if cm.Number == is.Number && after(cm.Updated, since) {
			items = append(items, c.a.commentJSON(c.owner, c.repo, c.t, cm))
		}
	}
	return c.paged(items)
}

// repoComments is GET …/issues/comments: every issue and pull request
// conversation comment, sort created (default) or updated, direction
// asc by default (as GitHub's documentation says: desc only when asked).
func (c *ireq) repoComments() reply {
	if !c.can("issues", "read") && !c.can("pull_requests", "read") {
		return forbidden
	}
	sortBy, asc, ok := c.sortOrder([]string{"created", "updated"}, true)
	since, okSince := c.since()
	if !ok || !okSince {
		return validation
	}
	var list []*comment
	for _, cm := range c.t.comments {
		if after(cm.Updated, since) && c.canIssue(c.t.issues[cm.Number], "read") {
			list = append(list, cm)
		}
	}
	byUpdated(list, func(cm *comment) (time.Time, int64) {
		if sortBy == "updated" {
			return cm.Updated, cm.ID
		}
		return cm.Created, cm.ID
	}, asc)
	items := make([]any, 0, len(list))
	for _, cm := range list {
		items = append(items, c.a.commentJSON(c.owner, c.repo, c.t, cm))
	}
	return c.paged(items)
}

func (c *ireq) comment(i int) *comment {
	id := c.id(i)
	for _, cm := range c.t.comments {
		if cm.ID == id {
			return cm
		}
	}
	return nil
}

func (c *ireq) getComment() reply {
	cm := c.comment(0)
	if cm == nil {
		return c.missing(nil)
	}
	if !c.canIssue(c.t.issues[cm.Number], "read") {
		return forbidden
	}
	return reply{status: http.StatusOK, v: c.a.commentJSON(c.owner, c.repo, c.t, cm)}
}

// commentBody reads {"body": "…"} (required, at most 65,536 bytes).
func (c *ireq) commentBody() (string, reply, bool) {
	var req struct {
		Body *string `json:"body"`
	}
	if !c.decode(&req) {
		return "", badJSON, false
	}
	if req.Body == nil || *req.Body == "" || len(*req.Body) > maxCommentBytes {
		return "", validation, false
	}
	return *req.Body, reply{}, true
}

func (c *ireq) createComment() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "write") {
		return c.missing(is)
	}
	body, bad, ok := c.commentBody()
	if !ok {
		return bad
	}
	now := c.a.now()
	cm := &comment{ID: c.a.newIDLocked(), Number: is.Number, User: c.me, Body: body, Created: now, Updated: now}
	c.t.comments = append(c.t.comments, cm)
	is.Updated = now
	return reply{status: http.StatusCreated, v: c.a.commentJSON(c.owner, c.repo, c.t, cm)}
}

// updateComment is PATCH …/issues/comments/{id} {"body"}: only the
// comment's author (here: the App's own comments) may edit it.
func (c *ireq) updateComment() reply {
	cm := c.comment(0)
	if cm == nil {
		return c.missing(nil)
	}
	if !c.canIssue(c.t.issues[cm.Number], "write") || cm.User != c.me {
		return forbidden
	}
	body, bad, ok := c.commentBody()
	if !ok {
		return bad
	}
	cm.Body, cm.Updated = body, c.a.now()
	if is := c.t.issues[cm.Number]; is != nil {
		is.Updated = cm.Updated
	}
	return reply{status: http.StatusOK, v: c.a.commentJSON(c.owner, c.repo, c.t, cm)}
}

// react adds content by the App to list: 201 new, 200 when the App had
// already reacted so (GitHub answers the existing reaction).
func (c *ireq) react(list *[]*reaction) reply {
	var req struct {
		Content *string `json:"content"`
	}
	if !c.decode(&req) {
		return badJSON
	}
	if req.Content == nil || !slices.Contains(reactionContents, *req.Content) {
		return validation
	}
	for _, r := range *list {
		if r.User == c.me && r.Content == *req.Content {
			return reply{status: http.StatusOK, v: reactionJSON(r)}
		}
	}
	r := &reaction{ID: c.a.newIDLocked(), User: c.me, Content: *req.Content, Created: c.a.now()}
	*list = append(*list, r)
	return reply{status: http.StatusCreated, v: reactionJSON(r)}
}

func (c *ireq) reactions(list []*reaction) reply {
	want := c.r.URL.Query().Get("content")
	if want != "" && !slices.Contains(reactionContents, want) {
		return validation
	}
	var items []any
	for _, r := range list {
		if want == "" || r.Content == want {
			items = append(items, reactionJSON(r))
		}
	}
	return c.paged(items)
}

func (c *ireq) issueReactions() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "read") {
		return c.missing(is)
	}
	return c.reactions(is.Reactions)
}

func (c *ireq) reactIssue() reply {
	is := c.issue(0)
	if is == nil || !c.canIssue(is, "write") {
		return c.missing(is)
	}
	return c.react(&is.Reactions)
}

func (c *ireq) commentReactions() reply {
	cm := c.comment(0)
	if cm == nil || !c.canIssue(c.t.issues[cm.Number], "read") {
		return c.missing(nil)
	}
	return c.reactions(cm.Reactions)
}

func (c *ireq) reactComment() reply {
	cm := c.comment(0)
	if cm == nil {
		return c.missing(nil)
	}
	if !c.canIssue(c.t.issues[cm.Number], "write") {
		return forbidden
	}
	return c.react(&cm.Reactions)
}

// permission is GET …/collaborators/{username}/permission: the legacy
// base role (admin, write, read, none) and the role itself. Someone who
// is no collaborator reads a public repository (read) and nothing of a
// private one (none); an unknown login is 404.
func (c *ireq) permission() reply {
	if !c.can("metadata", "read") {
		return forbidden
	}
	u := c.a.accounts[strings.ToLower(c.args[0])]
	if u == nil {
		return notFound
	}
	col, ok := c.t.collab[strings.ToLower(u.Login)]
	role, base := "none", "none"
	switch {
	case ok:
		role, base = col.Role, col.base()
	case c.a.public(c.owner, c.repo):
		role, base = "read", "read"
	}
	perm := base
	switch base {
	case RoleMaintain:
		perm = RoleWrite
	case RoleTriage:
		perm = RoleRead
	}
	rank := map[string]int{RoleRead: 1, RoleTriage: 2, RoleWrite: 3, RoleMaintain: 4, RoleAdmin: 5}[base]
	user := userJSON(u)
	user["role_name"] = role
	user["permissions"] = map[string]any{"pull": rank >= 1, "triage": rank >= 2, "push": rank >= 3,
		"maintain": rank >= 4, "admin": rank >= 5}
	return reply{status: http.StatusOK, v: map[string]any{"permission": perm, "role_name": role, "user": user}}
}

func (c *ireq) reviewCommentList(pr int) reply {
	if !c.can("pull_requests", "read") {
		return forbidden
	}
	sortBy, asc, ok := c.sortOrder([]string{"created", "updated"}, true)
	since, okSince := c.since()
	if !ok || !okSince {
		return validation
	}
	var list []*reviewComment
	for _, rc := range c.t.reviewC {
		if (pr == 0 || rc.Pull == pr) && after(rc.Updated, since) {
			list = append(list, rc)
		}
	}
	byUpdated(list, func(rc *reviewComment) (time.Time, int64) {
		if sortBy == "updated" {
			return rc.Updated, rc.ID
		}
		return rc.Created, rc.ID
	}, asc)
	items := make([]any, 0, len(list))
	for _, rc := range list {
		items = append(items, c.a.reviewCommentJSON(c.owner, c.repo, c.t, rc))
	}
	return c.paged(items)
}

// repoReviewComments is GET …/pulls/comments: every review comment, sort
// created (default) or updated, ascending unless direction says desc.
func (c *ireq) repoReviewComments() reply { return c.reviewCommentList(0) }

func (c *ireq) pullReviewComments() reply {
	is := c.issue(0)
	if is == nil || is.Pull == nil {
		return notFound
	}
	return c.reviewCommentList(is.Number)
}

func (c *ireq) reviewComment(i int) *reviewComment {
	id := c.id(i)
	for _, rc := range c.t.reviewC {
		if rc.ID == id {
			return rc
		}
	}
	return nil
}

func (c *ireq) getReviewComment() reply {
	if !c.can("pull_requests", "read") {
		return forbidden
	}
	rc := c.reviewComment(0)
	if rc == nil {
		return notFound
	}
	return reply{status: http.StatusOK, v: c.a.reviewCommentJSON(c.owner, c.repo, c.t, rc)}
}

func (c *ireq) reviewCommentReactions() reply {
	if !c.can("pull_requests", "read") {
		return forbidden
	}
	rc := c.reviewComment(0)
	if rc == nil {
		return notFound
	}
	return c.reactions(rc.Reactions)
}

func (c *ireq) reactReviewComment() reply {
	if !c.can("pull_requests", "write") {
		return forbidden
	}
	rc := c.reviewComment(0)
	if rc == nil {
		return notFound
	}
	return c.react(&rc.Reactions)
}

func (c *ireq) listReviews() reply {
	if !c.can("pull_requests", "read") {
		return forbidden
	}
	is := c.issue(0)
	if is == nil || is.Pull == nil {
		return notFound
	}
	var items []any
	for _, r := range c.t.reviews {
		if r.Pull == is.Number {
			items = append(items, c.a.reviewJSON(c.owner, c.repo, c.t, r))
		}
	}
	return c.paged(items)
}

// submitReview is POST …/pulls/{n}/reviews {commit_id, body, event} by
// the App: APPROVE, REQUEST_CHANGES or COMMENT (the last two need a
// body); the author of a pull request cannot approve or request changes
// on it (GitHub's 422). Without event the review stays PENDING.
func (c *ireq) submitReview() reply {
	if !c.can("pull_requests", "write") {
		return forbidden
	}
	is := c.issue(0)
	if is == nil || is.Pull == nil {
		return notFound
	}
	var req struct {
		CommitID string `json:"commit_id"`
		Body     string `json:"body"`
		Event    string `json:"event"`
	}
	if !c.decode(&req) {
		return badJSON
	}
	state := map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED", "": "PENDING"}[req.Event]
	switch {
	case state == "":
		return validation
	case req.Body == "" && (state == "CHANGES_REQUESTED" || state == "COMMENTED"):
		return fail(http.StatusUnprocessableEntity, "Unprocessable Entity")
	case is.User == c.me && (state == "APPROVED" || state == "CHANGES_REQUESTED"):
		return fail(http.StatusUnprocessableEntity, "Unprocessable Entity")
	}
	r, err := c.a.reviewLocked(c.owner, c.repo, is, c.me, state, req.CommitID, req.Body)
	if err != nil {
		return fail(http.StatusUnprocessableEntity, "Unprocessable Entity")
	}
	return reply{status: http.StatusOK, v: c.a.reviewJSON(c.owner, c.repo, c.t, r)}
}

// reviewLocked records a review of pull request is by u at commit (the
// pull request's head when ""). a.mu held.
func (a *API) reviewLocked(owner, repo string, is *issue, u *account, state, commit, body string) (*review, error) {
	head := is.Pull.HeadSHA
	if sha, ok := a.branchSHA(owner, repo, is.Pull.Head); ok && is.Pull.State == "open" {
		head = sha
	}
	if commit == "" {
		commit = head
	}
	if len(commit) != 40 || strings.Trim(commit, "0123456789abcdef") != "" {
		return nil, errBadCommit
	}
	t := a.trackerLocked(owner, repo)
	r := &review{ID: a.newIDLocked(), Pull: is.Number, User: u, Body: body, State: state, CommitID: commit, Submitted: a.now()}
	t.reviews = append(t.reviews, r)
	is.Updated = r.Submitted
	return r, nil
}

// branchRef is GET …/git/ref/heads/{branch} (contents read): the
// branch's commit, 404 when there is no such branch.
func (c *ireq) branchRef() reply {
	if !c.can("contents", "read") {
		return forbidden
	}
	sha, ok := c.a.branchSHA(c.owner, c.repo, c.args[0])
	if !ok {
		return notFound
	}
	ref := "refs/heads/" + c.args[0]
	return reply{status: http.StatusOK, v: map[string]any{"ref": ref, "node_id": nodeID("REF", int64(len(ref))),
		"url":    repoAPI(c.owner, c.repo) + "/git/" + ref,
		"object": map[string]any{"sha": sha, "type": "commit", "url": repoAPI(c.owner, c.repo) + "/git/commits/" + sha}}}
}

// pullIssueLocked records a new pull request's issue, opened by the App
// (the pull request and the issue share their number, as on GitHub).
// a.mu held.
func (a *API) pullIssueLocked(owner, repo string, p *pull) {
	t := a.trackerLocked(owner, repo)
	t.issues[p.Number] = &issue{Number: p.Number, User: a.accountLocked(a.BotLogin()), State: "open",
		Created: p.Created, Updated: p.Created, Pull: p}
}

// closingKeyword matches GitHub's closing keywords before an issue
// reference in a pull request's body ("Fixes #12", "closes: #3").
var closingKeyword = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+#([0-9]{1,9})\b`)

// mergedLocked records that pull request p was merged by actor as merge:
// its merged and closed events, and, when it went into the default
// branch, the closing of every open issue its body names with a closing
// keyword, as GitHub does. a.mu held.
func (a *API) mergedLocked(owner, repo string, p *pull, actor *account, merge string) {
	t := a.trackerLocked(owner, repo)
	now := a.now()
	is := t.issues[p.Number]
	if is == nil {
		return
	}
	is.Closed, is.ClosedBy, is.Updated = now, actor, now
	t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: p.Number, Event: "merged", Actor: actor, CommitID: merge, Created: now},
		&issueEvent{ID: a.newIDLocked(), Number: p.Number, Event: "closed", Actor: actor, Created: now})
	if p.Base != a.defaultBranch(owner, repo) {
		return
	}
	for _, m := range closingKeyword.FindAllStringSubmatch(p.Body, 16) {
		n, _ := strconv.Atoi(m[1])
		target := t.issues[n]
		if target == nil || target.Pull != nil || target.State != "open" {
			continue
		}
		target.State, target.StateReason, target.Closed, target.ClosedBy, target.Updated = "closed", "completed", now, actor, now
		t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: n, Event: "closed", Actor: actor,
			CommitID: merge, StateReason: "completed", Created: now})
	}
}

// defaultBranch is the branch HEAD of the served repository names.
func (a *API) defaultBranch(owner, repo string) string {
	b, err := os.ReadFile(a.gitRoot + "/" + owner + "/" + repo + ".git/HEAD")
	if err != nil {
		return ""
	}
	ref, _ := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
	return ref
}

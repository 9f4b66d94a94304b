package githubfake

import (
	"net/url"
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

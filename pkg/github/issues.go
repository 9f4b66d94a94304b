package github

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Bounds of the issue calls (intake, DECISIONS 17).
const (
	// FeedPerPage is the largest page GitHub serves; a feed reader asks
	// for fewer after ClassTooLarge (bodies of 65,536 characters, escaped,
	// can make a full page larger than MaxResponseBytes).
	FeedPerPage = 100
	// maxIssuePages bounds one issue's events or comments: 1,000 of each.
	maxIssuePages = 10
	maxGitHubID   = 1<<53 - 1
	maxNameBytes  = 256 // a login, a label name, an event or user type
)

// User is an account as an issue, comment or event names it: its login
// and type ("User", "Bot", "Organization"). Neither is checked here
// beyond its size: the trust rule (intake.Authorize) decides.
type User struct {
	Login string
	Type  string
}

// Issue is the part of an issue (or pull request: IsPull) intake reads.
type Issue struct {
	Number    int
	Title     string
	Body      string
	State     string // "open" or "closed"
	User      User
	Labels    []string
	IsPull    bool // the issue is a pull request
	CreatedAt time.Time
	UpdatedAt time.Time
}

// HasLabel reports whether the issue carries label (GitHub's label names
// compare without case).
func (i *Issue) HasLabel(label string) bool {
	for _, l := range i.Labels {
		if strings.EqualFold(l, label) {
			return true
		}
	}
	return false
}

// IssueComment is a conversation comment on an issue or pull request.
type IssueComment struct {
	ID          int64
	IssueNumber int
	Body        string
	User        User
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// IssueEvent is one entry of an issue's events: Label is the label's
// name for labeled and unlabeled.
type IssueEvent struct {
	ID        int64
	Event     string
	Actor     User
	Label     string
	CreatedAt time.Time
}

// Page is one conditional read of a feed. NotModified: GitHub answered
// 304 to If-None-Match, and only ETag (the one sent) and Rate are set.
// Full: the page held as many items as asked for, so more may follow.
type Page[T any] struct {
	NotModified bool
	ETag        string
	Items       []T
	Full        bool
	Rate        RateLimit
}

type userJSON struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

func (u *userJSON) user() (User, bool) {
	if u == nil {
		return User{}, true // a deleted account ("ghost") may come as null
	}
	return User{Login: u.Login, Type: u.Type}, len(u.Login) <= maxNameBytes && len(u.Type) <= maxNameBytes
}

type issueJSON struct {
	Number      int               `json:"number"`
	Title       string            `json:"title"`
	Body        *string           `json:"body"`
	State       string            `json:"state"`
	User        *userJSON         `json:"user"`
	Labels      []json.RawMessage `json:"labels"`
	PullRequest json.RawMessage   `json:"pull_request"`
	CreatedAt   string            `json:"created_at"`
	UpdatedAt   string            `json:"updated_at"`
}

func (j *issueJSON) issue() (Issue, bool) {
	i := Issue{Number: j.Number, Title: j.Title, State: j.State,
		IsPull: len(j.PullRequest) > 0 && string(j.PullRequest) != "null"}
	if j.Body != nil {
		i.Body = *j.Body
	}
	var ok bool
	if i.User, ok = j.User.user(); !ok {
		return Issue{}, false
	}
	for _, raw := range j.Labels {
		// GitHub's schema allows a label as a bare name or an object.
		var name string
		if json.Unmarshal(raw, &name) != nil {
			var l struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(raw, &l) != nil {
				return Issue{}, false
			}
			name = l.Name
		}
		if len(name) > maxNameBytes {
			return Issue{}, false
		}
		i.Labels = append(i.Labels, name)
	}
	c, err1 := time.Parse(time.RFC3339, j.CreatedAt)
	u, err2 := time.Parse(time.RFC3339, j.UpdatedAt)
	if err1 != nil || err2 != nil || i.Number <= 0 || i.Number > maxGitHubID || (i.State != "open" && i.State != "closed") {
		return Issue{}, false
	}
	i.CreatedAt, i.UpdatedAt = c.UTC(), u.UTC()
	return i, true
}

type commentJSON struct {
	ID        int64     `json:"id"`
	Body      *string   `json:"body"`
	User      *userJSON `json:"user"`
	IssueURL  string    `json:"issue_url"`
	CreatedAt string    `json:"created_at"`
	UpdatedAt string    `json:"updated_at"`
}

func (j *commentJSON) comment(owner, repo string) (IssueComment, bool) {
	c := IssueComment{ID: j.ID}
	if j.Body != nil {
		c.Body = *j.Body
	}
	var ok bool
	if c.User, ok = j.User.user(); !ok {
		return IssueComment{}, false
	}
	// issue_url is the API URL of the issue the comment belongs to.
	prefix := APIBase + "/repos/" + owner + "/" + repo + "/issues/"
	if len(j.IssueURL) <= len(prefix) || !strings.EqualFold(j.IssueURL[:len(prefix)], prefix) {
		return IssueComment{}, false
	}
	n, err := strconv.Atoi(j.IssueURL[len(prefix):])
	created, err1 := time.Parse(time.RFC3339, j.CreatedAt)
	updated, err2 := time.Parse(time.RFC3339, j.UpdatedAt)
	if err != nil || err1 != nil || err2 != nil || n <= 0 || n > maxGitHubID || c.ID <= 0 || c.ID > maxGitHubID ||
		strconv.Itoa(n) != j.IssueURL[len(prefix):] {
		return IssueComment{}, false
	}
	c.IssueNumber, c.CreatedAt, c.UpdatedAt = n, created.UTC(), updated.UTC()
	return c, true
}

type eventJSON struct {
	ID        int64     `json:"id"`
	Event     string    `json:"event"`
	Actor     *userJSON `json:"actor"`
	CreatedAt string    `json:"created_at"`
	Label     *struct {
		Name string `json:"name"`
	} `json:"label"`
}

func (j *eventJSON) event() (IssueEvent, bool) {
	e := IssueEvent{ID: j.ID, Event: j.Event}
	var ok bool
	if e.Actor, ok = j.Actor.user(); !ok {
		return IssueEvent{}, false
	}
	if j.Label != nil {
		e.Label = j.Label.Name
	}
	t, err := time.Parse(time.RFC3339, j.CreatedAt)
	if err != nil || e.ID <= 0 || e.ID > maxGitHubID || e.Event == "" || len(e.Event) > maxNameBytes || len(e.Label) > maxNameBytes {
		return IssueEvent{}, false
	}
	e.CreatedAt = t.UTC()
	return e, true
}

// errMalformedList is a list this client cannot believe.
var errMalformedList = errors.New("github: malformed list")

// ParseIssues decodes a page of GitHub's issue list: each entry needs a
// number, a state, its times and bounded names, else the whole page is
// refused.
func ParseIssues(body []byte) ([]Issue, error) {
	var list []issueJSON
	if json.Unmarshal(body, &list) != nil || list == nil {
		return nil, errMalformedList
	}
	out := make([]Issue, 0, len(list))
	for i := range list {
		is, ok := list[i].issue()
		if !ok {
			return nil, errMalformedList
		}
		out = append(out, is)
	}
	return out, nil
}

// ParseIssueComments decodes a page of owner/repo's issue comments; each
// names its issue by the API URL of owner/repo's issue.
func ParseIssueComments(body []byte, owner, repo string) ([]IssueComment, error) {
	var list []commentJSON
	if json.Unmarshal(body, &list) != nil || list == nil {
		return nil, errMalformedList
	}
	out := make([]IssueComment, 0, len(list))
	for i := range list {
		c, ok := list[i].comment(owner, repo)
		if !ok {
			return nil, errMalformedList
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseIssueEvents decodes a page of an issue's events.
func ParseIssueEvents(body []byte) ([]IssueEvent, error) {
	var list []eventJSON
	if json.Unmarshal(body, &list) != nil || list == nil {
		return nil, errMalformedList
	}
	out := make([]IssueEvent, 0, len(list))
	for i := range list {
		e, ok := list[i].event()
		if !ok {
			return nil, errMalformedList
		}
		out = append(out, e)
	}
	return out, nil
}

func validRepo(owner, repo string, token *Token) bool {
	return ident.ValidGitHubOwner(owner) && ident.ValidGitHubRepo(repo) && token != nil
}

// feedQuery is the query of a repository-wide feed: everything updated
// at or after since, oldest change first, perPage to a page.
func feedQuery(since time.Time, perPage int) url.Values {
	return url.Values{"sort": {"updated"}, "direction": {"asc"}, "since": {since.UTC().Format(time.RFC3339)},
		"per_page": {strconv.Itoa(perPage)}}
}

// ListIssuesSince reads the first page of owner/repo's issues and pull
// requests, any state, updated at or after since, oldest change first
// (GET /repos/{o}/{r}/issues?state=all&sort=updated&direction=asc&since=),
// perPage (1..FeedPerPage) to a page, conditionally when etag is set. A
// rate limit is not waited out: it fails at once as ClassRateLimited with
// RetryAfter, for the poller to schedule.
func (c *Client) ListIssuesSince(ctx context.Context, token *Token, owner, repo string, since time.Time, perPage int, etag string) (*Page[Issue], error) {
	return readFeed(ctx, c, "list_issues", token, owner, repo, "/issues", url.Values{"state": {"all"}}, since, perPage, etag, ParseIssues)
}

// ListIssueCommentsSince reads the first page of the conversation
// comments on all of owner/repo's issues and pull requests updated at or
// after since, oldest change first (GET
// /repos/{o}/{r}/issues/comments?sort=updated&direction=asc&since=),
// like ListIssuesSince.
func (c *Client) ListIssueCommentsSince(ctx context.Context, token *Token, owner, repo string, since time.Time, perPage int, etag string) (*Page[IssueComment], error) {
	return readFeed(ctx, c, "list_issue_comments", token, owner, repo, "/issues/comments", nil, since, perPage, etag,
		func(b []byte) ([]IssueComment, error) { return ParseIssueComments(b, owner, repo) })
}

// readFeed reads one page of a repository-wide feed of changes since a
// time (the List…Since calls): the arguments checked, the read made once
// and conditionally, a 304 answered NotModified, the page parsed and
// bounded by perPage.
func readFeed[T any](ctx context.Context, c *Client, op string, token *Token, owner, repo, path string, extra url.Values, since time.Time, perPage int, etag string, parse func([]byte) ([]T, error)) (*Page[T], error) {
	if !validRepo(owner, repo, token) || perPage < 1 || perPage > FeedPerPage || since.IsZero() || !boundedToken(etag, maxETagBytes) {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	q := feedQuery(since, perPage)
	for k, v := range extra {
		q[k] = v
	}
	resp, err := c.getOnce(ctx, op, token, "/repos/"+owner+"/"+repo+path, q, etag)
	if err != nil {
		return nil, err
	}
	p := &Page[T]{Rate: rateOf(resp.header), ETag: etagOf(resp, etag)}
	if resp.status == http.StatusNotModified {
		p.NotModified = true
		return p, nil
	}
	if p.Items, err = parse(resp.body); err != nil || len(p.Items) > perPage {
		return nil, &APIError{Op: op, Status: resp.status, Class: ClassMalformed}
	}
	p.Full = len(p.Items) == perPage
	return p, nil
}

// etagOf is the ETag an answer gave (the one sent for a 304), or "" when
// it is unusable.
func etagOf(resp *response, sent string) string {
	if resp.status == http.StatusNotModified {
		return sent
	}
	tag := resp.header.Get("Etag")
	if !boundedToken(tag, maxETagBytes) {
		return ""
	}
	return tag
}

// getOnce sends one GET (If-None-Match: etag when set) without waiting
// out limits or retrying: a 304 to a request without etag is malformed,
// a limit is ClassRateLimited with RetryAfter, no answer ClassTransport.
func (c *Client) getOnce(ctx context.Context, op string, token *Token, path string, q url.Values, etag string) (*response, error) {
	k := call{op: op, method: http.MethodGet, path: path, query: q, auth: token.value}
	if etag != "" {
		k.header = http.Header{"If-None-Match": {etag}}
	}
	resp, err := c.send(ctx, k, nil)
	if errors.Is(err, errTooLarge) {
		return nil, &APIError{Op: op, Class: ClassTooLarge}
	}
	if err != nil {
		return nil, &APIError{Op: op, Class: ClassTransport}
	}
	switch {
	case resp.status == http.StatusOK:
		return resp, nil
	case resp.status == http.StatusNotModified && etag != "":
		return resp, nil
	case resp.status == http.StatusNotModified:
		return nil, &APIError{Op: op, Status: resp.status, Class: ClassMalformed}
	}
	msg := errorMessage(resp.body)
	if wait, limited := c.limitWait(resp, msg, c.retryBase); limited {
		return nil, &APIError{Op: op, Status: resp.status, Class: ClassRateLimited, RetryAfter: wait, msg: msg}
	}
	return nil, &APIError{Op: op, Status: resp.status, Class: classify(resp.status, msg), msg: msg}
}

// GetIssue reads issue (or pull request) number of owner/repo: its title,
// body and updated_at come from one answer, so a caller can tell whether
// the text it holds is older than a moment.
func (c *Client) GetIssue(ctx context.Context, token *Token, owner, repo string, number int) (*Issue, error) {
	const op = "get_issue"
	if !validRepo(owner, repo, token) || number <= 0 || number > maxGitHubID {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/issues/" + strconv.Itoa(number), want: []int{http.StatusOK}, retryUncertain: true})
	if err != nil {
		return nil, err
	}
	var j issueJSON
	if err := decode(op, r, &j); err != nil {
		return nil, err
	}
	i, ok := j.issue()
	if !ok || i.Number != number {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return &i, nil
}

// IssueEvents lists every event of issue number, oldest first (GET
// /repos/{o}/{r}/issues/{n}/events, pages of 100, at most 1,000 events:
// more is ClassMalformed rather than a partial view).
func (c *Client) IssueEvents(ctx context.Context, token *Token, owner, repo string, number int) ([]IssueEvent, error) {
	const op = "list_issue_events"
	if !validRepo(owner, repo, token) || number <= 0 || number > maxGitHubID {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	return pages(ctx, c, op, token, "/repos/"+owner+"/"+repo+"/issues/"+strconv.Itoa(number)+"/events", nil, ParseIssueEvents)
}

// IssueComments lists the conversation comments of issue number, oldest
// first (GET /repos/{o}/{r}/issues/{n}/comments, pages of 100, at most
// 1,000).
func (c *Client) IssueComments(ctx context.Context, token *Token, owner, repo string, number int) ([]IssueComment, error) {
	const op = "list_comments"
	if !validRepo(owner, repo, token) || number <= 0 || number > maxGitHubID {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	list, err := pages(ctx, c, op, token, "/repos/"+owner+"/"+repo+"/issues/"+strconv.Itoa(number)+"/comments", nil,
		func(b []byte) ([]IssueComment, error) { return ParseIssueComments(b, owner, repo) })
	if err != nil {
		return nil, err
	}
	for _, cm := range list {
		if cm.IssueNumber != number {
			return nil, &APIError{Op: op, Class: ClassMalformed}
		}
	}
	return list, nil
}

// pages reads every page of a list (per_page 100), following GitHub's
// Link rel="next" (or a full page without one), at most maxIssuePages.
func pages[T any](ctx context.Context, c *Client, op string, token *Token, path string, q url.Values, parse func([]byte) ([]T, error)) ([]T, error) {
	var out []T
	for page := 1; page <= maxIssuePages; page++ {
		pq := url.Values{"per_page": {strconv.Itoa(FeedPerPage)}, "page": {strconv.Itoa(page)}}
		for k, v := range q {
			pq[k] = v
		}
		r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value, path: path, query: pq,
			want: []int{http.StatusOK}, retryUncertain: true})
		if err != nil {
			return nil, err
		}
		list, err := parse(r.body)
		if err != nil || len(list) > FeedPerPage {
			return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
		}
		out = append(out, list...)
		if len(list) == 0 || !hasNextPage(r.header.Values("Link")) && len(list) < FeedPerPage {
			return out, nil
		}
	}
	return nil, &APIError{Op: op, Class: ClassMalformed}
}

// CollaboratorPermission is GitHub's answer to "get repository
// permissions for a user": Permission is the legacy base role (admin,
// write, read, none), RoleName the role itself (custom roles included).
type CollaboratorPermission struct {
	Permission string
	RoleName   string
	User       User
}

// Permission asks GitHub what login may do in owner/repo (GET
// /repos/{o}/{r}/collaborators/{login}/permission). A 404 (no such
// account, or none GitHub will describe) answers permission and role
// "none". The answer's user, when named, must be login.
func (c *Client) Permission(ctx context.Context, token *Token, owner, repo, login string) (*CollaboratorPermission, error) {
	const op = "get_permission"
	if !validRepo(owner, repo, token) || !ident.ValidGitHubLogin(login) {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/collaborators/" + url.PathEscape(login) + "/permission",
		want: []int{http.StatusOK, http.StatusNotFound}, retryUncertain: true})
	if err != nil {
		return nil, err
	}
	if r.status == http.StatusNotFound {
		return &CollaboratorPermission{Permission: "none", RoleName: "none", User: User{Login: login}}, nil
	}
	var body struct {
		Permission string    `json:"permission"`
		RoleName   string    `json:"role_name"`
		User       *userJSON `json:"user"`
	}
	if err := decode(op, r, &body); err != nil {
		return nil, err
	}
	u, ok := body.User.user()
	if !ok || len(body.Permission) > maxNameBytes || len(body.RoleName) > maxNameBytes ||
		(u.Login != "" && !strings.EqualFold(u.Login, login)) {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return &CollaboratorPermission{Permission: body.Permission, RoleName: body.RoleName, User: u}, nil
}

// Reaction targets: an issue itself, one of its conversation comments, a
// pull request review comment.
const (
	ReactIssue         = "issue"
	ReactComment       = "comment"
	ReactReviewComment = "review_comment"
)

// Reactions this client sends: "eyes" (seen, working on it), "+1"
// (done), "confused" (refused).
const (
	ReactionEyes     = "eyes"
	ReactionPlusOne  = "+1"
	ReactionConfused = "confused"
)

// AddReaction reacts with content to an issue (id: its number), an issue
// comment or a review comment (id: the comment's id). GitHub answers 200
// for a reaction that exists already and 201 for a new one, so a repeat
// after a lost answer is harmless.
func (c *Client) AddReaction(ctx context.Context, token *Token, owner, repo, target string, id int64, content string) error {
	const op = "add_reaction"
	var path string
	switch target {
	case ReactIssue:
		path = "/issues/" + strconv.FormatInt(id, 10) + "/reactions"
	case ReactComment:
		path = "/issues/comments/" + strconv.FormatInt(id, 10) + "/reactions"
	case ReactReviewComment:
		path = "/pulls/comments/" + strconv.FormatInt(id, 10) + "/reactions"
	}
	if !validRepo(owner, repo, token) || path == "" || id <= 0 || id > maxGitHubID ||
		(content != ReactionEyes && content != ReactionPlusOne && content != ReactionConfused) {
		return &APIError{Op: op, Class: ClassMalformed}
	}
	req := struct {
		Content string `json:"content"`
	}{content}
	_, err := c.do(ctx, call{op: op, method: http.MethodPost, auth: token.value, path: "/repos/" + owner + "/" + repo + path,
		body: req, want: []int{http.StatusOK, http.StatusCreated}, mutation: true, retryUncertain: true})
	return err
}

// MaxCommentBodyBytes bounds a comment this client writes (GitHub allows
// 65,536 characters).
const MaxCommentBodyBytes = 65536

// CreateIssueComment comments body on issue (or pull request) number. It
// is never retried after an uncertain outcome (a second comment would
// result): the caller lists the issue's comments and decides.
func (c *Client) CreateIssueComment(ctx context.Context, token *Token, owner, repo string, number int, body string) (*IssueComment, error) {
	const op = "create_comment"
	if !validRepo(owner, repo, token) || number <= 0 || number > maxGitHubID || body == "" || len(body) > MaxCommentBodyBytes {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	req := struct {
		Body string `json:"body"`
	}{body}
	r, err := c.do(ctx, call{op: op, method: http.MethodPost, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/issues/" + strconv.Itoa(number) + "/comments",
		body: req, want: []int{http.StatusCreated}, mutation: true})
	if err != nil {
		return nil, err
	}
	return oneComment(op, r, owner, repo, number, 0)
}

// EditIssueComment replaces the body of comment id (PATCH
// /repos/{o}/{r}/issues/comments/{id}); a repeat is harmless, so it is
// retried after an uncertain outcome. A deleted comment is ClassNotFound.
func (c *Client) EditIssueComment(ctx context.Context, token *Token, owner, repo string, id int64, body string) (*IssueComment, error) {
	const op = "edit_comment"
	if !validRepo(owner, repo, token) || id <= 0 || id > maxGitHubID || body == "" || len(body) > MaxCommentBodyBytes {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	req := struct {
		Body string `json:"body"`
	}{body}
	r, err := c.do(ctx, call{op: op, method: http.MethodPatch, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/issues/comments/" + strconv.FormatInt(id, 10),
		body: req, want: []int{http.StatusOK}, mutation: true, retryUncertain: true})
	if err != nil {
		return nil, err
	}
	return oneComment(op, r, owner, repo, 0, id)
}

// oneComment decodes a single comment answer, which must be on issue
// number (when set) and have id (when set).
func oneComment(op string, r *response, owner, repo string, number int, id int64) (*IssueComment, error) {
	var j commentJSON
	if err := decode(op, r, &j); err != nil {
		return nil, err
	}
	cm, ok := j.comment(owner, repo)
	if !ok || (number != 0 && cm.IssueNumber != number) || (id != 0 && cm.ID != id) {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return &cm, nil
}

// BranchHead returns the commit branch points at in owner/repo (GET
// /repos/{o}/{r}/git/ref/heads/{branch}). A missing branch is
// ClassNotFound.
func (c *Client) BranchHead(ctx context.Context, token *Token, owner, repo, branch string) (string, error) {
	const op = "get_ref"
	if !validRepo(owner, repo, token) || !SafeBranch(branch) {
		return "", &APIError{Op: op, Class: ClassMalformed}
	}
	segs := strings.Split(branch, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/git/ref/heads/" + strings.Join(segs, "/"), want: []int{http.StatusOK}, retryUncertain: true})
	if err != nil {
		return "", err
	}
	var body struct {
		Ref    string `json:"ref"`
		Object struct {
			SHA  string `json:"sha"`
			Type string `json:"type"`
		} `json:"object"`
	}
	if err := decode(op, r, &body); err != nil {
		return "", err
	}
	if body.Ref != "refs/heads/"+branch || body.Object.Type != "commit" || !ident.ValidSHA(body.Object.SHA) {
		return "", &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return body.Object.SHA, nil
}

// AppSlugAs returns the App's slug (GET /app, as app): its bot account
// on GitHub is slug + "[bot]".
func (c *Client) AppSlugAs(ctx context.Context, app App) (string, error) {
	const op = "get_app"
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, sign: c.signer(app), path: "/app",
		want: []int{http.StatusOK}, retryUncertain: true})
	if err != nil {
		return "", err
	}
	var body struct {
		Slug string `json:"slug"`
	}
	if err := decode(op, r, &body); err != nil {
		return "", err
	}
	if !ident.ValidGitHubOwner(body.Slug) {
		return "", &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return body.Slug, nil
}

package githubfake

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Each issues route's answer (the table in api_issues_routes.go).

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

package githubfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// pull is one pull request of the fake.
type pull struct {
	Number  int
	Title   string
	Body    string
	Head    string // branch in the same repository
	HeadSHA string // the branch's commit when last seen
	Base    string
	State   string // open | closed
	Merged  bool
	Created time.Time
}

func repoKey(owner, repo string) string { return strings.ToLower(owner + "/" + repo) }

// branchSHA reads refs/heads/<branch> of the served bare repository from
// its ref files (loose, then packed-refs), as cheap as GitHub's answer.
func (a *API) branchSHA(owner, repo, branch string) (string, bool) {
	if !validName(owner) || !validName(repo) || branch == "" || strings.HasPrefix(branch, "-") ||
		strings.Contains(branch, "..") || strings.HasPrefix(branch, "/") {
		return "", false
	}
	dir := a.gitRoot + "/" + owner + "/" + repo + ".git"
	ref := "refs/heads/" + branch
	if b, err := os.ReadFile(dir + "/" + ref); err == nil {
		sha := strings.TrimSpace(string(b))
		return sha, len(sha) == 40
	}
	packed, err := os.ReadFile(dir + "/packed-refs")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if sha, name, ok := strings.Cut(line, " "); ok && name == ref && len(sha) == 40 {
			return sha, true
		}
	}
	return "", false
}

// isAncestor reports whether a is an ancestor of (or equal to) b.
func (a *API) isAncestor(owner, repo, x, y string) bool {
	cmd := exec.Command(a.git, "--git-dir="+a.gitRoot+"/"+owner+"/"+repo+".git", "merge-base", "--is-ancestor", x, y)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=/usr/bin:/bin"}
	return cmd.Run() == nil
}

func (a *API) pullJSON(owner, repo string, p *pull) map[string]any {
	if sha, ok := a.branchSHA(owner, repo, p.Head); ok && p.State == "open" {
		p.HeadSHA = sha
	}
	full := owner + "/" + repo
	var mergedAt any
	if p.Merged {
		mergedAt = p.Created.UTC().Format(time.RFC3339)
	}
	// The pull request's side as an issue (api_issues.go): its author,
	// labels, times.
	t := a.trackerLocked(owner, repo)
	is := t.issues[p.Number]
	if is == nil {
		a.pullIssueLocked(owner, repo, p)
		is = t.issues[p.Number]
	}
	labels := []any{}
	for _, l := range is.Labels {
		labels = append(labels, labelJSON(owner, repo, l))
	}
	baseSHA, _ := a.branchSHA(owner, repo, p.Base)
	num := strconv.Itoa(p.Number)
	api := repoAPI(owner, repo)
	html := "https://github.com/" + full + "/pull/" + num
	var body any
	if p.Body != "" {
		body = p.Body
	}
	var closedAt any
	if p.State == "closed" {
		closedAt = stamp(is.Updated)
		if !is.Closed.IsZero() {
			closedAt = stamp(is.Closed)
		}
	}
	if p.Merged {
		mergedAt = closedAt
		if mergedAt == nil {
			mergedAt = stamp(p.Created)
		}
	}
	repoObj := a.repoJSON(owner, repo)
	var mergedBy any
	if p.Merged && is.ClosedBy != nil {
		mergedBy = userJSON(is.ClosedBy)
	}
	return map[string]any{
		"id": stableID("pull", full+"#"+num), "node_id": nodeID("PR", stableID("pull", full+"#"+num)),
		"number": p.Number, "state": p.State, "locked": false, "title": p.Title, "body": body,
		"user": userJSON(is.User), "labels": labels, "assignee": nil, "assignees": []any{}, "milestone": nil,
		"requested_reviewers": []any{}, "requested_teams": []any{},
		"html_url": html, "url": api + "/pulls/" + num, "diff_url": html + ".diff", "patch_url": html + ".patch",
		"issue_url": api + "/issues/" + num, "commits_url": api + "/pulls/" + num + "/commits",
		"review_comments_url": api + "/pulls/" + num + "/comments", "review_comment_url": api + "/pulls/comments{/number}",
		"comments_url": api + "/issues/" + num + "/comments", "statuses_url": api + "/statuses/" + p.HeadSHA,
		"merged_at": mergedAt, "closed_at": closedAt, "mergeable": nil, "mergeable_state": "unknown", "rebaseable": nil,
		"draft": false, "merged": p.Merged, "merged_by": mergedBy, "merge_commit_sha": a.mergeSHALocked(owner, repo, p),
		"created_at": stamp(p.Created), "updated_at": stamp(is.Updated),
		"author_association": t.association(owner, is.User), "auto_merge": nil, "active_lock_reason": nil,
		"maintainer_can_modify": false, "comments": 0, "review_comments": 0, "commits": 1, "additions": 0, "deletions": 0,
		"changed_files": 0, "_links": pullLinks(owner, repo, p.Number, p.HeadSHA),
		"head": map[string]any{"ref": p.Head, "sha": p.HeadSHA, "label": owner + ":" + p.Head, "user": ownerJSON(owner),
			"repo": repoObj},
		"base": map[string]any{"ref": p.Base, "sha": baseSHA, "label": owner + ":" + p.Base, "user": ownerJSON(owner),
			"repo": repoObj},
	}
}

// listPulls is GET /repos/{o}/{r}/pulls: state open (default), closed or
// all; head "owner:branch" filters, while a head without the "owner:"
// prefix is silently ignored (every PR is listed), as on GitHub.
func (a *API) listPulls(w http.ResponseWriter, r *http.Request, owner, repo string) {
	if _, ok := a.requireToken(w, r, owner, repo, "pull_requests", "read"); !ok {
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	headOwner, headBranch, filter := strings.Cut(q.Get("head"), ":")
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	if perPage <= 0 || perPage > 100 {
		perPage = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var all []map[string]any
	for _, p := range a.pulls[repoKey(owner, repo)] {
		if state != "all" && p.State != state {
			continue
		}
		if filter && (!strings.EqualFold(headOwner, owner) || p.Head != headBranch) {
			continue
		}
		all = append(all, a.pullJSON(owner, repo, p))
	}
	// Newest first, like GitHub's default sort (created, desc).
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	start := (page - 1) * perPage
	out := []map[string]any{}
	if start < len(all) {
		out = all[start:min(len(all), start+perPage)]
	}
	if start+perPage < len(all) {
		// GitHub announces further pages in the Link header.
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(page+1))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", `<https://api.github.com`+next.RequestURI()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, out)
}

// getPull is GET /repos/{o}/{r}/pulls/{n}, with an ETag: a 304 to a
// matching If-None-Match is free for an authorized request. Budget name
// and limit come from ServeHTTP.
func (a *API) getPull(w http.ResponseWriter, r *http.Request, owner, repo, num, name string, limit int) {
	if _, ok := a.requireToken(w, r, owner, repo, "pull_requests", "read"); !ok {
		return
	}
	n, _ := strconv.Atoi(num)
	a.mu.Lock()
	var body []byte
	for _, p := range a.pulls[repoKey(owner, repo)] {
		if p.Number == n {
			body, _ = json.Marshal(a.pullJSON(owner, repo, p))
		}
	}
	a.mu.Unlock()
	if body == nil {
		a.spend(w, name, limit, false)
		WriteError(w, http.StatusNotFound, "Not Found")
		return
	}
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	notModified := r.Header.Get("If-None-Match") == etag
	if a.spend(w, name, limit, notModified) {
		limitExceeded(w, name)
		return
	}
	w.Header().Set("ETag", etag)
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// createPull is POST /repos/{o}/{r}/pulls {title, head, base, body}: 201;
// 422 when head or base is not a branch, when there are no commits
// between them, or when an open PR for the same head exists ("A pull
// request already exists for owner:branch.").
func (a *API) createPull(w http.ResponseWriter, r *http.Request, owner, repo string) {
	if _, ok := a.requireToken(w, r, owner, repo, "pull_requests", "write"); !ok {
		return
	}
	var req struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxAPIBody)).Decode(&req); err != nil {
		WriteError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if a.ci().take(DeliveryFaultHeadInvalid) {
		pullValidation(w, "field", "head", "invalid", "")
		return
	}
	head := req.Head
	if o, b, ok := strings.Cut(head, ":"); ok {
		if !strings.EqualFold(o, owner) {
			pullValidation(w, "field", "head", "invalid", "")
			return
		}
		head = b
	}
	if req.Title == "" {
		pullValidation(w, "field", "title", "missing_field", "")
		return
	}
	headSHA, ok := a.branchSHA(owner, repo, head)
	if !ok {
		pullValidation(w, "field", "head", "invalid", "")
		return
	}
	baseSHA, ok := a.branchSHA(owner, repo, req.Base)
	if !ok {
		pullValidation(w, "field", "base", "invalid", "")
		return
	}
	if a.isAncestor(owner, repo, headSHA, baseSHA) {
		pullValidation(w, "custom", "", "", "No commits between "+req.Base+" and "+head)
		return
	}
	a.mu.Lock()
	key := repoKey(owner, repo)
	for _, p := range a.pulls[key] {
		if p.State == "open" && p.Head == head {
			a.mu.Unlock()
			pullValidation(w, "custom", "", "", "A pull request already exists for "+owner+":"+head+".")
			return
		}
	}
	a.nextPR++
	p := &pull{Number: a.nextPR, Title: req.Title, Body: req.Body, Head: head, HeadSHA: headSHA,
		Base: req.Base, State: "open", Created: a.now()}
	a.pulls[key] = append(a.pulls[key], p)
	a.pullIssueLocked(owner, repo, p)
	body := a.pullJSON(owner, repo, p)
	a.mu.Unlock()
	// GitHub's work after the answer: a pull request that conflicts with
	// its base gets no pull_request runs at all; whether it changes
	// workflows is known for its merge. It is done before the answer so
	// that what a client sees depends only on the fake's clock (the runs
	// appear at created + their Start), never on how fast this git work
	// happens to run: under a virtual clock a client could otherwise poll
	// past a run's appearance before it was recorded.
	if !a.conflicts(owner, repo, baseSHA, headSHA) {
		a.eventAt(owner, repo, "pull_request", headSHA, p.Created)
	}
	wf := a.changesWorkflows(owner, repo, req.Base, headSHA)
	a.mu.Lock()
	a.wfChanges[repoKey(owner, repo)+" "+headSHA] = wf
	a.mu.Unlock()
	if a.takeFault(APIFaultLosePRCreate) {
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusCreated, body)
}

// conflicts reports whether merging head into base conflicts.
func (a *API) conflicts(owner, repo, base, head string) bool {
	cmd := exec.Command(a.git, "--git-dir="+a.gitRoot+"/"+owner+"/"+repo+".git", "merge-tree", "--write-tree", base, head)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=/usr/bin:/bin"}
	return cmd.Run() != nil
}

// SetPullState closes (or merges) PR number of owner/repo, as a person
// on GitHub would.
func (a *API) SetPullState(owner, repo string, number int, state string, merged bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pulls[repoKey(owner, repo)] {
		if p.Number == number {
			p.State, p.Merged = state, merged
			return true
		}
	}
	return false
}

// PersonAct does to PR number of owner/repo what a person on GitHub's
// page would: "close" closes it, "merge" merges it (a real merge commit
// on its base, as the merge button makes).
func (a *API) PersonAct(owner, repo string, number int, act string) error {
	a.mergeMu.Lock()
	defer a.mergeMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	var p *pull
	for _, q := range a.pulls[repoKey(owner, repo)] {
		if q.Number == number {
			p = q
		}
	}
	if p == nil || p.State != "open" {
		return fmt.Errorf("no open pull request %d", number)
	}
	switch act {
	case "close":
		p.State = "closed"
		a.pullClosedLocked(owner, repo, p, a.accountLocked(owner))
		return nil
	case "merge":
		head, ok := a.branchSHA(owner, repo, p.Head)
		if !ok {
			return fmt.Errorf("no head")
		}
		merge, err := a.mergeCommit(owner, repo, p, head)
		if err != nil {
			return err
		}
		p.State, p.Merged, p.HeadSHA = "closed", true, head
		a.mergedLocked(owner, repo, p, a.accountLocked(owner), merge)
		c := a.ci()
		c.mu.Lock()
		if c.merges[repoKey(owner, repo)] == nil {
			c.merges[repoKey(owner, repo)] = map[int]string{}
		}
		c.merges[repoKey(owner, repo)][number] = merge
		c.mu.Unlock()
		return nil
	}
	return fmt.Errorf("unknown act %q", act)
}

// pullValidation answers GitHub's 422 "Validation Failed" for PRs.
func pullValidation(w http.ResponseWriter, kind, field, code, message string) {
	e := map[string]any{"resource": "PullRequest", "code": kind}
	if kind == "field" {
		e["field"], e["code"] = field, code
	} else {
		e["message"] = message
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
		"errors": []any{e}, "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request", "status": "422"})
}

// dropConnection closes the client's connection without an answer: the
// server has acted, the client never learns it.
func dropConnection(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// Unwrap lets http.ResponseController reach the connection beneath the
// request log's recorder.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

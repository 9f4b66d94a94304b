package githubfake

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The people of a test: accounts that open, edit, label, comment on and
// review issues and pull requests the way they would on GitHub's pages,
// and their roles on a repository (SetCollaborator), which the
// collaborator-permission route reports. A login ending in [bot] is a bot
// account. The fake lets anyone do anything here, whatever their role
// (GitHub would refuse a read-only user's label): the point of these
// helpers is to show what the Gate does with what it reads.
//
// The same acts are the control route POST /act (Act), and roles POST
// /collaborator; GET /issue-state?owner=&repo=&number= answers an issue
// and everything on it (Snapshot) for e2e scripts.

// Roles of SetCollaborator: GitHub's five repository roles. Any other
// name is an organization's custom role, which inherits a Base role.
const (
	RoleAdmin    = "admin"
	RoleMaintain = "maintain"
	RoleWrite    = "write"
	RoleTriage   = "triage"
	RoleRead     = "read"
)

// Collaborator is login's role on a repository. Base is the role a
// custom Role inherits (one of the five); it is ignored for the five.
type Collaborator struct {
	Login string `json:"login"`
	Role  string `json:"role"`
	Base  string `json:"base,omitempty"`
}

func builtinRole(r string) bool {
	switch r {
	case RoleAdmin, RoleMaintain, RoleWrite, RoleTriage, RoleRead:
		return true
	}
	return false
}

func (c Collaborator) base() string {
	if builtinRole(c.Role) {
		return c.Role
	}
	return c.Base
}

// SetCollaborator gives c.Login c.Role on owner/repo (Role "" removes
// them from the collaborators).
func (a *API) SetCollaborator(owner, repo string, c Collaborator) error {
	if !validLogin(c.Login) || !validName(owner) || !validName(repo) {
		return errors.New("bad login or repository")
	}
	if c.Role != "" && !builtinRole(c.Role) && (!builtinRole(c.Base) || len(c.Role) > 100) {
		return fmt.Errorf("custom role %q needs one of the five roles as its base", c.Role)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.trackerLocked(owner, repo)
	a.accountLocked(c.Login)
	if c.Role == "" {
		delete(t.collab, strings.ToLower(c.Login))
	} else {
		t.collab[strings.ToLower(c.Login)] = c
	}
	return nil
}

// validLogin is GitHub's login shape (letters, digits, single inner
// hyphens, at most 39), optionally followed by [bot].
func validLogin(s string) bool {
	s = strings.TrimSuffix(s, "[bot]")
	if s == "" || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

var (
	errNoIssue   = errors.New("no such issue")
	errNoComment = errors.New("no such comment")
	errBadCommit = errors.New("not a commit of the pull request")
)

// person runs f with login's account and owner/repo's tracker, a.mu held.
func (a *API) person(owner, repo, login string, f func(t *tracker, u *account) error) error {
	if !validLogin(login) || !validName(owner) || !validName(repo) {
		return errors.New("bad login or repository")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return f(a.trackerLocked(owner, repo), a.accountLocked(login))
}

// OpenIssue opens an issue on owner/repo as login and returns its number.
func (a *API) OpenIssue(owner, repo, login, title, body string) (int, error) {
	if title == "" || len(title) > maxTitleBytes || len(body) > maxCommentBytes {
		return 0, errors.New("bad title or body")
	}
	var n int
	err := a.person(owner, repo, login, func(t *tracker, u *account) error {
		a.nextPR++
		n = a.nextPR
		now := a.now()
		t.issues[n] = &issue{Number: n, Title: title, Body: body, User: u, State: "open", Created: now, Updated: now}
		return nil
	})
	return n, err
}

// EditIssue changes issue n's title (unless "") and body as login, the
// way an edit on GitHub's page does (a later edit than its label, say).
func (a *API) EditIssue(owner, repo string, n int, login, title, body string) error {
	if len(title) > maxTitleBytes || len(body) > maxCommentBytes {
		return errors.New("bad title or body")
	}
	return a.person(owner, repo, login, func(t *tracker, u *account) error {
		is := t.issues[n]
		if is == nil || is.Pull != nil {
			return errNoIssue
		}
		now := a.now()
		if title != "" && title != is.Title {
			t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: n, Event: "renamed", Actor: u, Created: now})
			is.Title = title
		}
		is.Body, is.Updated = body, now
		return nil
	})
}

// SetIssueState closes (reason completed or not_planned) or reopens
// issue n as login, with its closed or reopened event.
func (a *API) SetIssueState(owner, repo string, n int, login, state string) error {
	return a.person(owner, repo, login, func(t *tracker, u *account) error {
		is := t.issues[n]
		if is == nil || is.Pull != nil {
			return errNoIssue
		}
		now := a.now()
		switch {
		case state == "open" && is.State == "closed":
			is.State, is.StateReason, is.Closed, is.ClosedBy = "open", "reopened", time.Time{}, nil
			t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: n, Event: "reopened", Actor: u, StateReason: "reopened", Created: now})
		case (state == "completed" || state == "not_planned") && is.State == "open":
			is.State, is.StateReason, is.Closed, is.ClosedBy = "closed", state, now, u
			t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: n, Event: "closed", Actor: u, StateReason: state, Created: now})
		default:
			return fmt.Errorf("cannot move issue %d (%s) to %q", n, is.State, state)
		}
		is.Updated = now
		return nil
	})
}

// Label adds (on) or removes label on issue or pull request n as login:
// a labeled or unlabeled event naming login. Adding a label the issue
// has, or removing one it lacks, is an error and no event.
func (a *API) Label(owner, repo string, n int, login, label string, on bool) error {
	if label == "" || len(label) > maxLabelBytes {
		return errors.New("bad label")
	}
	return a.person(owner, repo, login, func(t *tracker, u *account) error {
		is := t.issues[n]
		if is == nil {
			return errNoIssue
		}
		if !a.labelLocked(owner, repo, is, u, label, on) {
			return fmt.Errorf("label %q unchanged", label)
		}
		return nil
	})
}

// Comment writes a conversation comment on issue or pull request n as
// login and returns its id.
func (a *API) Comment(owner, repo string, n int, login, body string) (int64, error) {
	if body == "" || len(body) > maxCommentBytes {
		return 0, errors.New("bad comment body")
	}
	var id int64
	err := a.person(owner, repo, login, func(t *tracker, u *account) error {
		is := t.issues[n]
		if is == nil {
			return errNoIssue
		}
		now := a.now()
		id = a.newIDLocked()
		t.comments = append(t.comments, &comment{ID: id, Number: n, User: u, Body: body, Created: now, Updated: now})
		is.Updated = now
		return nil
	})
	return id, err
}

// EditComment changes comment id's body as its author login.
func (a *API) EditComment(owner, repo string, id int64, login, body string) error {
	if body == "" || len(body) > maxCommentBytes {
		return errors.New("bad comment body")
	}
	return a.person(owner, repo, login, func(t *tracker, u *account) error {
		for _, c := range t.comments {
			if c.ID == id {
				if c.User != u {
					return errors.New("only its author edits a comment")
				}
				c.Body, c.Updated = body, a.now()
				t.issues[c.Number].Updated = c.Updated
				return nil
			}
		}
		return errNoComment
	})
}

// Review submits a review of pull request n as login: state APPROVED,
// CHANGES_REQUESTED or COMMENTED, at commit (the head when "").
func (a *API) Review(owner, repo string, n int, login, state, commit, body string) (int64, error) {
	if state != "APPROVED" && state != "CHANGES_REQUESTED" && state != "COMMENTED" {
		return 0, fmt.Errorf("bad review state %q", state)
	}
	var id int64
	err := a.person(owner, repo, login, func(t *tracker, u *account) error {
		is := t.issues[n]
		if is == nil || is.Pull == nil {
			return errNoIssue
		}
		if is.User == u && state != "COMMENTED" {
			return errors.New("the author cannot approve or request changes")
		}
		r, err := a.reviewLocked(owner, repo, is, u, state, commit, body)
		if err == nil {
			id = r.ID
		}
		return err
	})
	return id, err
}

// ReviewComment comments on line (of the new side) of path in pull
// request n's diff as login, as a single-comment review (COMMENTED): its
// commit is the head and its diff hunk GitHub's (the hunk's header and
// its lines up to the commented one). A line outside the diff is an
// error, as on GitHub.
func (a *API) ReviewComment(owner, repo string, n int, login, path string, line int, body string) (int64, error) {
	if body == "" || len(body) > maxCommentBytes || path == "" || line <= 0 {
		return 0, errors.New("bad review comment")
	}
	a.mu.Lock()
	t := a.trackerLocked(owner, repo)
	is := t.issues[n]
	var base, headRef string
	if is != nil && is.Pull != nil {
		base, headRef = is.Pull.Base, is.Pull.Head
	}
	a.mu.Unlock()
	head, ok := a.branchSHA(owner, repo, headRef)
	if base == "" || !ok {
		return 0, errNoIssue
	}
	hunk, err := a.diffHunk(owner, repo, base, head, path, line)
	if err != nil {
		return 0, err
	}
	var id int64
	err = a.person(owner, repo, login, func(t *tracker, u *account) error {
		r, err := a.reviewLocked(owner, repo, is, u, "COMMENTED", head, "")
		if err != nil {
			return err
		}
		id = a.newIDLocked()
		t.reviewC = append(t.reviewC, &reviewComment{ID: id, Pull: n, Review: r.ID, User: u, Body: body, Path: path,
			Line: line, DiffHunk: hunk, CommitID: head, Created: r.Submitted, Updated: r.Submitted})
		return nil
	})
	return id, err
}

// diffHunk is the part of base...head's diff of path that GitHub shows
// with a comment on new-side line: the hunk header and its lines up to
// that one.
func (a *API) diffHunk(owner, repo, base, head, path string, line int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.git, "--git-dir="+a.gitRoot+"/"+owner+"/"+repo+".git", "diff", "--no-color", "--no-ext-diff",
		"-U3", "refs/heads/"+base+"..."+head, "--", path)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	var hunk []string
	newLine := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "@@ ") {
			// @@ -a,b +c,d @@
			f := strings.Fields(l)
			if len(f) < 3 {
				return "", errors.New("bad hunk header")
			}
			start, _, _ := strings.Cut(strings.TrimPrefix(f[2], "+"), ",")
			newLine, _ = strconv.Atoi(start)
			hunk = []string{l}
			continue
		}
		if hunk == nil || strings.HasPrefix(l, `\`) {
			continue
		}
		hunk = append(hunk, l)
		if strings.HasPrefix(l, "-") {
			continue
		}
		if newLine == line {
			return strings.Join(hunk, "\n"), nil
		}
		newLine++
	}
	return "", fmt.Errorf("line %d of %s is not part of the diff", line, path)
}

// pullClosedLocked records that pull request p was closed by actor
// without a merge. a.mu held.
func (a *API) pullClosedLocked(owner, repo string, p *pull, actor *account) {
	t := a.trackerLocked(owner, repo)
	if is := t.issues[p.Number]; is != nil {
		now := a.now()
		is.Closed, is.ClosedBy, is.Updated = now, actor, now
		t.events = append(t.events, &issueEvent{ID: a.newIDLocked(), Number: p.Number, Event: "closed", Actor: actor, Created: now})
	}
}

// ActRequest is one act of the control route POST /act.
type ActRequest struct {
	As     string `json:"as"`
	Act    string `json:"act"` // open-issue, edit-issue, close-issue, reopen-issue, label, unlabel, comment, edit-comment, review, review-comment
	Owner  string `json:"owner"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	ID     int64  `json:"id"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Label  string `json:"label"`
	Path   string `json:"path"`
	Line   int    `json:"line"`
	// State: a review's (APPROVED, CHANGES_REQUESTED, COMMENTED) or
	// close-issue's reason (completed, the default, or not_planned).
	State  string `json:"state"`
	Commit string `json:"commit"`
}

// Act does r; it answers the number or id it made.
func (a *API) Act(r ActRequest) (number int, id int64, err error) {
	switch r.Act {
	case "open-issue":
		number, err = a.OpenIssue(r.Owner, r.Repo, r.As, r.Title, r.Body)
	case "edit-issue":
		err = a.EditIssue(r.Owner, r.Repo, r.Number, r.As, r.Title, r.Body)
	case "close-issue":
		if r.State == "" {
			r.State = "completed"
		}
		err = a.SetIssueState(r.Owner, r.Repo, r.Number, r.As, r.State)
	case "reopen-issue":
		err = a.SetIssueState(r.Owner, r.Repo, r.Number, r.As, "open")
	case "label", "unlabel":
		err = a.Label(r.Owner, r.Repo, r.Number, r.As, r.Label, r.Act == "label")
	case "comment":
		id, err = a.Comment(r.Owner, r.Repo, r.Number, r.As, r.Body)
	case "edit-comment":
		err = a.EditComment(r.Owner, r.Repo, r.ID, r.As, r.Body)
	case "review":
		id, err = a.Review(r.Owner, r.Repo, r.Number, r.As, r.State, r.Commit, r.Body)
	case "review-comment":
		id, err = a.ReviewComment(r.Owner, r.Repo, r.Number, r.As, r.Path, r.Line, r.Body)
	default:
		err = fmt.Errorf("unknown act %q", r.Act)
	}
	return number, id, err
}

// Snapshot is issue or pull request n of owner/repo as JSON, with what
// is on it, in the API's shapes: {"issue", "events", "comments",
// "reviews", "review_comments"}.
func (a *API) Snapshot(owner, repo string, n int) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.trackers[repoKey(owner, repo)]
	if t == nil || t.issues[n] == nil {
		return nil, errNoIssue
	}
	out := map[string]any{"issue": a.issueJSON(owner, repo, t, t.issues[n])}
	events, comments, reviews, rcs := []any{}, []any{}, []any{}, []any{}
	for _, e := range t.events {
		if e.Number == n {
			events = append(events, a.eventJSON(owner, repo, e))
		}
	}
	for _, c := range t.comments {
		if c.Number == n {
			j := a.commentJSON(owner, repo, t, c)
			var rs []any
			for _, r := range c.Reactions {
				rs = append(rs, reactionJSON(r))
			}
			j["reaction_list"] = rs
			comments = append(comments, j)
		}
	}
	for _, r := range t.reviews {
		if r.Pull == n {
			reviews = append(reviews, a.reviewJSON(owner, repo, t, r))
		}
	}
	for _, c := range t.reviewC {
		if c.Pull == n {
			rcs = append(rcs, a.reviewCommentJSON(owner, repo, t, c))
		}
	}
	var rs []any
	for _, r := range t.issues[n].Reactions {
		rs = append(rs, reactionJSON(r))
	}
	out["issue"].(map[string]any)["reaction_list"] = rs
	out["events"], out["comments"], out["reviews"], out["review_comments"] = events, comments, reviews, rcs
	return json.Marshal(out)
}

// attachPeople installs POST /act, POST /collaborator and GET
// /issue-state on the control mux.
func (a *API) attachPeople(s *Server) {
	s.Control.HandleFunc("POST /act", func(w http.ResponseWriter, r *http.Request) {
		var req ActRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 2*maxCommentBytes))
		dec.DisallowUnknownFields()
		if dec.Decode(&req) != nil {
			http.Error(w, "bad act request", http.StatusBadRequest)
			return
		}
		n, id, err := a.Act(req)
		if err != nil {
			http.Error(w, "act refused: "+err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"number": n, "id": id})
	})
	s.Control.HandleFunc("POST /collaborator", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Owner string `json:"owner"`
			Repo  string `json:"repo"`
			Collaborator
		}
		if decodeControl(w, r, &req) && a.SetCollaborator(req.Owner, req.Repo, req.Collaborator) == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "bad collaborator request", http.StatusBadRequest)
	})
	s.Control.HandleFunc("GET /issue-state", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, _ := strconv.Atoi(q.Get("number"))
		b, err := a.Snapshot(q.Get("owner"), q.Get("repo"), n)
		if err != nil {
			http.Error(w, "no such issue", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
}

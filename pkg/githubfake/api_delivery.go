package githubfake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What delivery needs beyond pull requests: the Actions runs list (public:
// readable without a token on the address's 60 an hour, or with an
// installation token holding actions read on its installation's budget;
// ETag/If-None-Match, a 304 free only when authorized), the exact-head
// merge (PUT …/pulls/{n}/merge) and the merged check (GET …/pulls/{n}/merge).
//
// Runs follow either scripted workflows (SetWorkflows, workflows.go: push
// runs at push time, pull_request runs when a pull request without
// conflicts opens, each listed after its start and completed after its
// duration) or, without them, SetCI's poll-counted mode: every commit that
// is the head of an open pull request gets one pull_request run (SetCIRuns:
// several), in_progress for the first RunPolls polls of it, then completed
// with the repository's conclusion; mode "none" never starts a run. Runs
// once listed stay listed after their pull request closes, as on GitHub.
// The list pages as GitHub's does: per_page (default 30, at most 100) and
// page, total_count of all runs, a Link header naming the next and last
// pages. The merge refuses, as GitHub, a workflow change without the
// workflows permission (403 "Resource not accessible by integration").

// CI modes (SetCI).
const (
	CISuccess = "success"
	CIFailure = "failure"
	CINone    = "none"
)

// Delivery fault modes (SetAPIFault extends to these through
// SetDeliveryFault).
const (
	// DeliveryFaultLoseMerge: the next merge is carried out, then the
	// connection is dropped before any answer.
	DeliveryFaultLoseMerge = "lose-merge"
	// DeliveryFaultNotMergeable: the next merge answers 405.
	DeliveryFaultNotMergeable = "not-mergeable"
	// DeliveryFaultMergeUnprocessable: the next merge answers 422
	// ("Validation Failed", which GitHub also sends when the endpoint has
	// been spammed).
	DeliveryFaultMergeUnprocessable = "merge-unprocessable"
	// DeliveryFaultBaseModified: the next merge answers 405 "Base branch
	// was modified. Review and try the merge again." without merging.
	DeliveryFaultBaseModified = "base-modified"
	// DeliveryFaultMergedFalse: the next merge answers 200 with "merged":
	// false and does not merge.
	DeliveryFaultMergedFalse = "merged-false"
	// DeliveryFaultHeadInvalid: the next PR creation answers 422 with the
	// head field invalid (GitHub has not caught up with the push yet).
	DeliveryFaultHeadInvalid = "head-invalid"
)

// Unauthenticated limit the runs list reports.
const unauthLimit = 60

// RunPolls is how many polls a run stays in_progress.
const RunPolls = 2

type ciState struct {
	mu     sync.Mutex
	modes  map[string]string         // repoKey -> mode (default success)
	polls  map[string]int            // repoKey + sha -> polls seen
	used   int                       // unauthenticated requests this window
	reset  time.Time                 // window end
	faults map[string]int            // delivery fault -> remaining hits
	merges map[string]map[int]string // repoKey -> PR number -> merge commit
	counts map[string]int            // repoKey -> runs per commit (default 1)
	// started: repoKey + sha whose runs were listed once (they stay)
	started map[string]bool
	timed   map[string]*timed // repoKey -> scripted workflows (workflows.go)
	nextRun int64
}

// Bounds of the runs list (GitHub's documented per_page default and
// maximum) and of SetCIRuns.
const (
	runsDefaultPerPage = 30
	runsMaxPerPage     = 100
	maxCIRuns          = 1000
)

func (a *API) ci() *ciState {
	a.ciOnce.Do(func() {
		a.ciSt = &ciState{modes: map[string]string{}, polls: map[string]int{}, faults: map[string]int{},
			merges: map[string]map[int]string{}, counts: map[string]int{}, started: map[string]bool{},
			timed: map[string]*timed{}}
	})
	return a.ciSt
}

// SetCI sets how the runs of owner/repo behave.
func (a *API) SetCI(owner, repo, mode string) error {
	switch mode {
	case CISuccess, CIFailure, CINone:
	default:
		return fmt.Errorf("unknown CI mode %q", mode)
	}
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modes[repoKey(owner, repo)] = mode
	return nil
}

// SetCIRuns sets how many runs (one per workflow) every candidate commit
// of owner/repo gets, 1 to 1000.
func (a *API) SetCIRuns(owner, repo string, n int) error {
	if n < 1 || n > maxCIRuns {
		return fmt.Errorf("runs per commit must be 1 to %d", maxCIRuns)
	}
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[repoKey(owner, repo)] = n
	return nil
}

// SetDeliveryFault arms a delivery fault for the next count merges.
func (a *API) SetDeliveryFault(mode string, count int) error {
	switch mode {
	case DeliveryFaultLoseMerge, DeliveryFaultNotMergeable, DeliveryFaultMergeUnprocessable,
		DeliveryFaultBaseModified, DeliveryFaultMergedFalse, DeliveryFaultHeadInvalid:
	default:
		return fmt.Errorf("unknown delivery fault %q", mode)
	}
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[mode] = count
	return nil
}

func (c *ciState) take(mode string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faults[mode] > 0 {
		c.faults[mode]--
		return true
	}
	return false
}

// attachDelivery installs the control routes POST /ci {"owner","repo","mode"}
// and POST /delivery-fault {"mode","count"}.
func (a *API) attachDelivery(s *Server) {
	s.Control.HandleFunc("POST /ci", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Owner, Repo, Mode string
			Runs              int // optional: runs per commit
		}
		if decodeControl(w, r, &req) && a.SetCI(req.Owner, req.Repo, req.Mode) == nil &&
			(req.Runs == 0 || a.SetCIRuns(req.Owner, req.Repo, req.Runs) == nil) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "bad ci request", http.StatusBadRequest)
	})
	s.Control.HandleFunc("POST /workflows", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Owner, Repo string
			// Workflows with Start and Duration in milliseconds.
			Workflows []struct {
				Name, Event, Conclusion string
				StartMS, DurationMS     int64
			}
		}
		if decodeControl(w, r, &req) {
			var wfs []Workflow
			for _, x := range req.Workflows {
				wfs = append(wfs, Workflow{Name: x.Name, Event: x.Event, Conclusion: x.Conclusion,
					Start: time.Duration(x.StartMS) * time.Millisecond, Duration: time.Duration(x.DurationMS) * time.Millisecond})
			}
			if a.SetWorkflows(req.Owner, req.Repo, wfs) == nil {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		http.Error(w, "bad workflows request", http.StatusBadRequest)
	})
	s.Control.HandleFunc("POST /protect", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Owner, Repo string
			Patterns    []string
		}
		if decodeControl(w, r, &req) && validName(req.Owner) && validName(req.Repo) {
			a.SetProtected(req.Owner, req.Repo, req.Patterns)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "bad protect request", http.StatusBadRequest)
	})
	s.Control.HandleFunc("POST /pull-act", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Owner, Repo string
			Number      int
			Act         string
		}
		if decodeControl(w, r, &req) && a.PersonAct(req.Owner, req.Repo, req.Number, req.Act) == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "bad pull-act request", http.StatusBadRequest)
	})
	s.Control.HandleFunc("POST /delivery-fault", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Mode  string
			Count int
		}
		if decodeControl(w, r, &req) && a.SetDeliveryFault(req.Mode, req.Count) == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "bad delivery-fault request", http.StatusBadRequest)
	})
}

// serveDelivery answers the delivery routes; false when parts is none.
func (a *API) serveDelivery(w http.ResponseWriter, r *http.Request, parts []string) bool {
	switch {
	case len(parts) == 6 && parts[0] == "repos" && parts[3] == "pulls" && parts[5] == "merge" && r.Method == http.MethodPut:
		a.mergePull(w, r, parts[1], parts[2], parts[4])
	case len(parts) == 6 && parts[0] == "repos" && parts[3] == "pulls" && parts[5] == "merge" && r.Method == http.MethodGet:
		a.pullMerged(w, r, parts[1], parts[2], parts[4])
	default:
		return false
	}
	return true
}

// listRuns is GET /repos/{o}/{r}/actions/runs?head_sha=…: public, so it
// may be read unauthenticated (the address's 60 an hour); with an
// installation token that token must reach the repository and hold
// actions read, and spends its installation's budget. A 304 to a
// matching If-None-Match is free only when authorized, as GitHub
// documents. Budget name and limit come from ServeHTTP.
func (a *API) listRuns(w http.ResponseWriter, r *http.Request, owner, repo, name string, limit int) {
	if bearer(r) != "" {
		if _, ok := a.requireToken(w, r, owner, repo, "actions", "read"); !ok {
			return
		}
	}
	c := a.ci()
	sha := r.URL.Query().Get("head_sha")
	key := repoKey(owner, repo)
	perPage, page := runsPage(r.URL.Query())
	all, timedRepo := a.timedRuns(owner, repo, sha)
	if !timedRepo {
		all = a.polledRuns(owner, repo, sha)
	}
	total := len(all)
	runs := []map[string]any{}
	for i := (page - 1) * perPage; i < total && i < page*perPage; i++ {
		runs = append(runs, a.runJSON(owner, repo, all[i]))
	}
	body, _ := json.Marshal(map[string]any{"total_count": total, "workflow_runs": runs})
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	notModified := r.Header.Get("If-None-Match") == etag
	over := a.spend(w, name, limit, notModified && name != budgetIP)
	if !over && !timedRepo {
		c.mu.Lock()
		c.polls[key+" "+sha]++ // polled runs progress with every answered poll
		c.mu.Unlock()
	}
	h := w.Header()
	h.Set("ETag", etag)
	if last := (total + perPage - 1) / perPage; page < last {
		u := "https://api.github.com/repos/" + owner + "/" + repo + "/actions/runs?head_sha=" + sha + "&per_page=" + strconv.Itoa(perPage)
		h.Set("Link", "<"+u+"&page="+strconv.Itoa(page+1)+`>; rel="next", <`+u+"&page="+strconv.Itoa(last)+`>; rel="last"`)
	}
	switch {
	case over:
		limitExceeded(w, name)
	case notModified:
		w.WriteHeader(http.StatusNotModified)
	default:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}
}

// polledRuns are the runs of a repository without scripted workflows
// (SetCI, SetCIRuns): one pull_request run per workflow for the head of
// an open pull request, in_progress for RunPolls answered polls, then
// completed with the repository's mode.
func (a *API) polledRuns(owner, repo, sha string) []map[string]any {
	c := a.ci()
	key := repoKey(owner, repo)
	a.mu.Lock()
	open := false
	for _, p := range a.pulls[key] {
		if h, ok := a.branchSHA(owner, repo, p.Head); ok && h == sha && p.State == "open" || p.HeadSHA == sha && p.Merged {
			open = true
		}
	}
	a.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Runs once started stay listed, as on GitHub, after their pull
	// request closes.
	open = open || c.started[key+" "+sha]
	mode := c.modes[key]
	if mode == "" {
		mode = CISuccess
	}
	total := 0
	if open && mode != CINone {
		total = max(c.counts[key], 1)
		c.started[key+" "+sha] = true
	}
	n := c.polls[key+" "+sha]
	out := make([]map[string]any, 0, total)
	for i := 0; i < total; i++ {
		run := map[string]any{"id": 1000 + len(sha)%7 + 10*i, "head_sha": sha, "status": "in_progress", "conclusion": nil,
			"event": "pull_request", "run_attempt": 1, "name": "CI " + strconv.Itoa(i+1)}
		if n >= RunPolls {
			run["status"], run["conclusion"] = "completed", mode
		}
		out = append(out, run)
	}
	return out
}

// runsPage reads per_page and page as GitHub does: per_page defaults to 30
// and is at most 100, page starts at 1.
func runsPage(q map[string][]string) (perPage, page int) {
	perPage, page = runsDefaultPerPage, 1
	if v, ok := q["per_page"]; ok && len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil && n > 0 {
			perPage = min(n, runsMaxPerPage)
		}
	}
	if v, ok := q["page"]; ok && len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil && n > 0 {
			page = n
		}
	}
	return perPage, page
}

// mergePull is PUT /repos/{o}/{r}/pulls/{n}/merge {sha, merge_method}: a
// real merge commit (base first parent, head second) in the served
// repository. 409 when the head is no longer sha, 405 when the PR is not
// open or merge_method is not "merge" (or the not-mergeable fault).
func (a *API) mergePull(w http.ResponseWriter, r *http.Request, owner, repo, num string) {
	if _, ok := a.requireToken(w, r, owner, repo, "pull_requests", "write"); !ok {
		return
	}
	tok, ok := a.requireToken(w, r, owner, repo, "contents", "write")
	if !ok {
		return
	}
	var req struct {
		SHA         string `json:"sha"`
		MergeMethod string `json:"merge_method"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxAPIBody)).Decode(&req); err != nil {
		WriteError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	n, _ := strconv.Atoi(num)
	c := a.ci()
	// git runs without a.mu held, so the rest of the API keeps answering
	// and merges of different pull requests run side by side (the base
	// branch moves by compare-and-swap, mergeCommit); one pull request
	// merges once at a time.
	key := repoKey(owner, repo) + "#" + num
	a.mu.Lock()
	var p *pull
	var snap pull
	for _, q := range a.pulls[repoKey(owner, repo)] {
		if q.Number == n {
			p, snap = q, *q
		}
	}
	busy := a.merging[key]
	if p != nil && !busy {
		a.merging[key] = true
		defer func() {
			a.mu.Lock()
			delete(a.merging, key)
			a.mu.Unlock()
		}()
	}
	a.mu.Unlock()
	if p == nil {
		WriteError(w, http.StatusNotFound, "Not Found")
		return
	}
	if busy {
		WriteError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	}
	head, ok := a.branchSHA(owner, repo, snap.Head)
	switch {
	case snap.State != "open" || !ok:
		WriteError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	case req.SHA != "" && req.SHA != head:
		WriteError(w, http.StatusConflict, "Head branch was modified. Review and try the merge again.")
		return
	case req.MergeMethod != "" && req.MergeMethod != "merge":
		WriteError(w, http.StatusMethodNotAllowed, "Only merge commits are allowed in this fake.")
		return
	case c.take(DeliveryFaultNotMergeable):
		WriteError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	case c.take(DeliveryFaultMergeUnprocessable):
		WriteError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	case tok.perms["workflows"] != "write" && a.mergeChangesWorkflows(owner, repo, snap.Base, head):
		// GitHub refuses an App's merge of a workflow change without
		// the workflows permission.
		WriteError(w, http.StatusForbidden, msgNotAccessible)
		return
	case c.take(DeliveryFaultBaseModified):
		WriteError(w, http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again.")
		return
	case c.take(DeliveryFaultMergedFalse):
		writeJSON(w, http.StatusOK, map[string]any{"sha": nil, "merged": false, "message": "Pull Request could not be merged"})
		return
	}
	merge, err := a.mergeCommit(owner, repo, &snap, head)
	if errors.Is(err, errBaseModified) {
		WriteError(w, http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again.")
		return
	}
	if err != nil {
		WriteError(w, http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	}
	a.mu.Lock()
	p.State, p.Merged, p.HeadSHA = "closed", true, head
	a.mergedLocked(owner, repo, p, a.accountLocked(a.BotLogin()), merge)
	a.mu.Unlock()
	c.mu.Lock()
	if c.merges[repoKey(owner, repo)] == nil {
		c.merges[repoKey(owner, repo)] = map[int]string{}
	}
	c.merges[repoKey(owner, repo)][n] = merge
	c.mu.Unlock()
	if c.take(DeliveryFaultLoseMerge) {
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sha": merge, "merged": true, "message": "Pull Request successfully merged"})
}

// mergeChangesWorkflows is changesWorkflows, from what the pull
// request's creation found when it did.
func (a *API) mergeChangesWorkflows(owner, repo, base, head string) bool {
	a.mu.Lock()
	wf, ok := a.wfChanges[repoKey(owner, repo)+" "+head]
	a.mu.Unlock()
	if ok {
		return wf
	}
	return a.changesWorkflows(owner, repo, base, head)
}

// changesWorkflows reports whether merging head into base changes
// anything under .github/workflows (the diff from their merge base).
func (a *API) changesWorkflows(owner, repo, base, head string) bool {
	gitDir := a.gitRoot + "/" + owner + "/" + repo + ".git"
	cmd := exec.Command(a.git, "--git-dir="+gitDir, "diff", "--quiet", "refs/heads/"+base+"..."+head, "--", ".github/workflows")
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=/usr/bin:/bin"}
	err := cmd.Run()
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 1
}

// MergeSHA is the merge commit of PR n of owner/repo ("" when not merged
// through the API).
func (a *API) MergeSHA(owner, repo string, n int) string {
	c := a.ci()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.merges[repoKey(owner, repo)][n]
}

// mergeCommit writes the merge of head into p's base branch and moves the
// base branch to it (only if it did not move meanwhile).
func (a *API) mergeCommit(owner, repo string, p *pull, head string) (string, error) {
	gitDir := a.gitRoot + "/" + owner + "/" + repo + ".git"
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, a.git, append([]string{"--git-dir=" + gitDir}, args...)...)
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=/usr/bin:/bin",
			"GIT_AUTHOR_NAME=GitHub", "GIT_AUTHOR_EMAIL=noreply@github.com",
			"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com"}
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	for try := 0; try < 3; try++ {
		base, ok := a.branchSHA(owner, repo, p.Base)
		if !ok {
			return "", fmt.Errorf("no base")
		}
		tree, err := run("merge-tree", "--write-tree", base, head)
		if err != nil {
			return "", err
		}
		tree, _, _ = strings.Cut(tree, "\n")
		msg := "Merge pull request #" + strconv.Itoa(p.Number) + " from " + owner + "/" + p.Head
		merge, err := run("commit-tree", tree, "-p", base, "-p", head, "-m", msg)
		if err != nil {
			return "", err
		}
		// Compare-and-swap: a base moved meanwhile (another merge) is
		// read again and merged onto.
		if _, err := run("update-ref", "refs/heads/"+p.Base, merge, base); err == nil {
			return merge, nil
		}
	}
	return "", errBaseModified
}

// errBaseModified: the base branch kept moving during a merge.
var errBaseModified = errors.New("base branch was modified")

// pullMerged is GET /repos/{o}/{r}/pulls/{n}/merge: 204 merged, 404 not.
func (a *API) pullMerged(w http.ResponseWriter, r *http.Request, owner, repo, num string) {
	if _, ok := a.requireToken(w, r, owner, repo, "pull_requests", "read"); !ok {
		return
	}
	n, _ := strconv.Atoi(num)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pulls[repoKey(owner, repo)] {
		if p.Number == n && p.Merged {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	WriteError(w, http.StatusNotFound, "Not Found")
}

// mergeSHALocked is the merge commit of p for its JSON (nil unless merged
// through the API).
func (a *API) mergeSHALocked(owner, repo string, p *pull) any {
	if sha := a.MergeSHA(owner, repo, p.Number); sha != "" && p.Merged {
		return sha
	}
	return nil
}

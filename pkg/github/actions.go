package github

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Bounds of one Actions runs answer.
const (
	runsPerPage = 100
	// maxRunPages: GitHub lists at most 1,000 runs for a head_sha filter.
	maxRunPages    = 10
	maxETagBytes   = 256
	maxRunStrBytes = 32
)

// WorkflowRun is the part of an Actions run delivery's verdict reads.
type WorkflowRun struct {
	ID         int64
	HeadSHA    string
	Status     string
	Conclusion string // "" until completed
}

// RateLimit is what an answer's x-ratelimit-* headers said (zero Limit
// when absent or unreadable).
type RateLimit struct {
	Limit     int
	Remaining int
	Reset     time.Time
}

// RunsPage is one answer of the runs list. NotModified: GitHub answered
// 304 to If-None-Match and nothing else is set but ETag and Rate.
type RunsPage struct {
	NotModified bool
	ETag        string
	TotalCount  int
	Runs        []WorkflowRun
	Rate        RateLimit
}

func rateOf(h http.Header) RateLimit {
	limit, err1 := strconv.Atoi(h.Get("X-Ratelimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("X-Ratelimit-Remaining"))
	reset, err3 := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit <= 0 || remaining < 0 || reset <= 0 {
		return RateLimit{}
	}
	return RateLimit{Limit: limit, Remaining: remaining, Reset: time.Unix(reset, 0)}
}

func boundedToken(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// ListRuns reads the Actions runs of headSHA (GET
// /repos/{o}/{r}/actions/runs?head_sha=…, pages of 100): with token, an
// installation token holding actions: read (the installation's own
// budget); with a nil token unauthenticated, as anyone may read a public
// repository (60 requests an hour per address), sending If-None-Match: etag when etag is set. When
// total_count exceeds the first page, the further pages are read too and
// the answer carries no ETag (a 304 of the first page would say nothing
// about the others); a run seen on two pages (the list shifted while it
// was read) is kept once. A rate limit is not waited out here: it fails
// at once as ClassRateLimited with RetryAfter, and the caller schedules
// the next poll.
func (c *Client) ListRuns(ctx context.Context, token *Token, owner, repo, headSHA, etag string) (*RunsPage, error) {
	const op = "list_runs"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || !ident.ValidSHA(headSHA) || !boundedToken(etag, maxETagBytes) {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	first, err := c.runsPage(ctx, token, owner, repo, headSHA, etag, 1)
	if err != nil || first.NotModified || first.TotalCount <= len(first.Runs) {
		return first, err
	}
	seen := make(map[int64]bool, first.TotalCount)
	runs := make([]WorkflowRun, 0, first.TotalCount)
	add := func(p *RunsPage) {
		for _, r := range p.Runs {
			if !seen[r.ID] {
				seen[r.ID] = true
				runs = append(runs, r)
			}
		}
	}
	add(first)
	out := &RunsPage{TotalCount: first.TotalCount, Rate: first.Rate}
	for page := 2; page <= maxRunPages && len(runs) < out.TotalCount; page++ {
		p, err := c.runsPage(ctx, token, owner, repo, headSHA, "", page)
		if err != nil {
			return nil, err
		}
		out.Rate = p.Rate
		out.TotalCount = max(out.TotalCount, p.TotalCount)
		if len(p.Runs) == 0 {
			break
		}
		add(p)
	}
	out.Runs = runs
	return out, nil
}

// runsPage reads one page of the runs list.
func (c *Client) runsPage(ctx context.Context, token *Token, owner, repo, headSHA, etag string, page int) (*RunsPage, error) {
	const op = "list_runs"
	q := url.Values{"head_sha": {headSHA}, "per_page": {strconv.Itoa(runsPerPage)}}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	k := call{op: op, method: http.MethodGet, path: "/repos/" + owner + "/" + repo + "/actions/runs", query: q}
	if etag != "" {
		k.header = http.Header{"If-None-Match": {etag}}
	}
	if token != nil {
		k.auth = token.value
	}
	resp, err := c.send(ctx, k, nil)
	if err != nil {
		return nil, &APIError{Op: op, Class: ClassTransport}
	}
	p := &RunsPage{Rate: rateOf(resp.header), ETag: resp.header.Get("Etag")}
	if !boundedToken(p.ETag, maxETagBytes) {
		p.ETag = ""
	}
	switch resp.status {
	case http.StatusNotModified:
		if etag == "" {
			return nil, &APIError{Op: op, Status: resp.status, Class: ClassMalformed}
		}
		p.NotModified, p.ETag = true, etag
		return p, nil
	case http.StatusOK:
	default:
		msg := errorMessage(resp.body)
		if wait, limited := c.limitWait(resp, msg, c.retryBase); limited {
			return nil, &APIError{Op: op, Status: resp.status, Class: ClassRateLimited, RetryAfter: wait, msg: msg}
		}
		return nil, &APIError{Op: op, Status: resp.status, Class: classify(resp.status, msg), msg: msg}
	}
	total, runs, err := parseRuns(resp.body)
	if err != nil {
		return nil, &APIError{Op: op, Status: resp.status, Class: ClassMalformed}
	}
	p.TotalCount, p.Runs = total, runs
	return p, nil
}

// parseRuns reads a runs list body: total_count and at most one page of
// well-formed runs (positive id, full head SHA, bounded status and
// conclusion), or an error and nothing.
func parseRuns(b []byte) (int, []WorkflowRun, error) {
	var body struct {
		TotalCount int `json:"total_count"`
		Runs       []struct {
			ID         int64   `json:"id"`
			HeadSHA    string  `json:"head_sha"`
			Status     string  `json:"status"`
			Conclusion *string `json:"conclusion"`
		} `json:"workflow_runs"`
	}
	if json.Unmarshal(b, &body) != nil || body.Runs == nil {
		return 0, nil, errMalformedRuns
	}
	if body.TotalCount < 0 || len(body.Runs) > runsPerPage || body.TotalCount < len(body.Runs) {
		return 0, nil, errMalformedRuns
	}
	runs := make([]WorkflowRun, 0, len(body.Runs))
	for _, r := range body.Runs {
		run := WorkflowRun{ID: r.ID, HeadSHA: r.HeadSHA, Status: r.Status}
		if r.Conclusion != nil {
			run.Conclusion = *r.Conclusion
		}
		if r.ID <= 0 || !ident.ValidSHA(r.HeadSHA) || run.Status == "" || !boundedToken(run.Status, maxRunStrBytes) ||
			!boundedToken(run.Conclusion, maxRunStrBytes) {
			return 0, nil, errMalformedRuns
		}
		runs = append(runs, run)
	}
	return body.TotalCount, runs, nil
}

var errMalformedRuns = errors.New("github: malformed runs list")

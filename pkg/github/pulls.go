package github

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// PR listing bounds.
const (
	pullsPerPage = 100
	maxPullPages = 10
)

// PullRequest is the part of a pull request this client relies on.
type PullRequest struct {
	Number  int
	State   string // "open" or "closed"
	Merged  bool
	URL     string // html_url
	HeadRef string
	HeadSHA string
	// HeadRepo is the head repository's owner/name ("" when GitHub no
	// longer knows it, e.g. a deleted fork).
	HeadRepo string
	BaseRef  string
	// MergeCommitSHA is the merge commit once Merged ("" otherwise).
	MergeCommitSHA string
}

// Open reports whether the PR is open.
func (p *PullRequest) Open() bool { return p.State == "open" }

type pullJSON struct {
	Number   int     `json:"number"`
	State    string  `json:"state"`
	MergedAt *string `json:"merged_at"`
	HTMLURL  string  `json:"html_url"`
	MergeSHA *string `json:"merge_commit_sha"`
	Head     struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func (j *pullJSON) pull(owner, repo string) (*PullRequest, bool) {
	p := &PullRequest{Number: j.Number, State: j.State, Merged: j.MergedAt != nil && *j.MergedAt != "",
		URL: j.HTMLURL, HeadRef: j.Head.Ref, HeadSHA: j.Head.SHA, BaseRef: j.Base.Ref}
	if j.Head.Repo != nil {
		p.HeadRepo = j.Head.Repo.FullName
	}
	if p.Merged && j.MergeSHA != nil {
		p.MergeCommitSHA = *j.MergeSHA
	}
	ok := p.Number > 0 && (p.State == "open" || p.State == "closed") &&
		strings.EqualFold(p.URL, GitBase+"/"+owner+"/"+repo+"/pull/"+strconv.Itoa(p.Number)) &&
		ident.ValidSHA(p.HeadSHA) && (p.MergeCommitSHA == "" || ident.ValidSHA(p.MergeCommitSHA)) && len(p.HeadRef) <= 255 && len(p.BaseRef) <= 255 && len(p.HeadRepo) <= 256
	return p, ok
}

// errPulls is a pull-request list this client cannot believe.
var errPulls = errors.New("github: malformed pull request list")

// ParsePulls decodes a page of GitHub's pull-request list for owner/repo:
// every entry must have a positive number, state open or closed, the
// canonical html_url, a full head SHA and bounded names. On error it
// returns nil.
func ParsePulls(body []byte, owner, repo string) ([]PullRequest, error) {
	var list []pullJSON
	if json.Unmarshal(body, &list) != nil {
		return nil, errPulls
	}
	out := make([]PullRequest, 0, len(list))
	for i := range list {
		p, ok := list[i].pull(owner, repo)
		if !ok {
			return nil, errPulls
		}
		out = append(out, *p)
	}
	return out, nil
}

// PullsForBranch lists every pull request (any state) whose head is
// owner:branch in owner/repo itself. The query always carries the
// "owner:" prefix (GitHub ignores a bare head filter and lists every
// PR), and the results are filtered again here so that an ignored filter
// can never make another branch's PR look like ours.
func (c *Client) PullsForBranch(ctx context.Context, token *Token, owner, repo, branch string) ([]PullRequest, error) {
	const op = "list_pulls"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || !SafeBranch(branch) || token == nil {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	var out []PullRequest
	for page := 1; page <= maxPullPages; page++ {
		q := url.Values{"head": {owner + ":" + branch}, "state": {"all"},
			"per_page": {strconv.Itoa(pullsPerPage)}, "page": {strconv.Itoa(page)}}
		r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value,
			path: "/repos/" + owner + "/" + repo + "/pulls", query: q, want: []int{http.StatusOK}, retryUncertain: true})
		if err != nil {
			return nil, err
		}
		list, err := ParsePulls(r.body, owner, repo)
		if err != nil {
			return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
		}
		for _, p := range list {
			if p.HeadRef == branch && strings.EqualFold(p.HeadRepo, owner+"/"+repo) {
				out = append(out, p)
			}
		}
		// GitHub announces a further page in the Link header; a full
		// page without one is read on too, in case the header was lost.
		if len(list) == 0 || !hasNextPage(r.header.Values("Link")) && len(list) < pullsPerPage {
			return out, nil
		}
	}
	// More pages than the bound: refuse rather than decide on a partial view.
	return nil, &APIError{Op: op, Class: ClassMalformed}
}

// CreatePull opens a pull request from branch into base. It is never
// retried after an uncertain outcome (5xx or lost response): the caller
// reads the branch's PRs and decides. A 422 "A pull request already
// exists" is ClassValidation with that message (see MessageContains).
func (c *Client) CreatePull(ctx context.Context, token *Token, owner, repo, branch, base, title, body string) (*PullRequest, error) {
	const op = "create_pull"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || !SafeBranch(branch) || !SafeBranch(base) || token == nil {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	req := struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
	}{title, branch, base, body}
	r, err := c.do(ctx, call{op: op, method: http.MethodPost, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/pulls", body: req, want: []int{http.StatusCreated}, mutation: true})
	if err != nil {
		return nil, err
	}
	var j pullJSON
	if err := decode(op, r, &j); err != nil {
		return nil, err
	}
	p, ok := j.pull(owner, repo)
	if !ok {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return p, nil
}

// GetPull reads one pull request.
func (c *Client) GetPull(ctx context.Context, token *Token, owner, repo string, number int) (*PullRequest, error) {
	const op = "get_pull"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || number <= 0 || token == nil {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/pulls/" + strconv.Itoa(number), want: []int{http.StatusOK}, retryUncertain: true})
	if err != nil {
		return nil, err
	}
	var j pullJSON
	if err := decode(op, r, &j); err != nil {
		return nil, err
	}
	p, ok := j.pull(owner, repo)
	if !ok || p.Number != number {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return p, nil
}

// GetPullIfChanged reads one pull request conditionally: with etag set,
// GitHub's 304 (notModified, nothing else set; it costs no rate limit for
// an authorized request) says it is as when etag was given.
func (c *Client) GetPullIfChanged(ctx context.Context, token *Token, owner, repo string, number int, etag string) (*PullRequest, string, bool, error) {
	const op = "get_pull"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || number <= 0 || token == nil || !boundedToken(etag, maxETagBytes) {
		return nil, "", false, &APIError{Op: op, Class: ClassMalformed}
	}
	k := call{op: op, method: http.MethodGet, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/pulls/" + strconv.Itoa(number), want: []int{http.StatusOK}, retryUncertain: true}
	if etag != "" {
		k.header = http.Header{"If-None-Match": {etag}}
		k.want = append(k.want, http.StatusNotModified)
	}
	r, err := c.do(ctx, k)
	if err != nil {
		return nil, "", false, err
	}
	if r.status == http.StatusNotModified {
		return nil, etag, true, nil
	}
	var j pullJSON
	if err := decode(op, r, &j); err != nil {
		return nil, "", false, err
	}
	p, ok := j.pull(owner, repo)
	if !ok || p.Number != number {
		return nil, "", false, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	tag := r.header.Get("Etag")
	if !boundedToken(tag, maxETagBytes) {
		tag = ""
	}
	return p, tag, false, nil
}

// PRExists reports whether err is GitHub's 422 for a second open PR on
// the same head.
func PRExists(err error) bool {
	var e *APIError
	return errorsAs(err, &e) && e.Class == ClassValidation && e.MessageContains("A pull request already exists")
}

// hasNextPage reports whether a Link header (RFC 8288, as GitHub sends it
// for pagination) has a rel="next" entry.
func hasNextPage(links []string) bool {
	for _, h := range links {
		for _, link := range strings.Split(h, ",") {
			_, params, ok := strings.Cut(link, ">")
			if !ok {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") {
					for _, rel := range strings.Fields(strings.Trim(v, `"`)) {
						if strings.EqualFold(rel, "next") {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// NoCommits reports whether err is GitHub's 422 for a pull request whose
// head adds nothing to its base ("No commits between …").
func NoCommits(err error) bool {
	var e *APIError
	return errorsAs(err, &e) && e.Class == ClassValidation && e.MessageContains("No commits between")
}

// HeadInvalid reports whether err is GitHub's 422 naming the head field
// invalid, which it answers for a branch pushed moments ago that it has
// not caught up with yet.
func HeadInvalid(err error) bool {
	var e *APIError
	return errorsAs(err, &e) && e.Class == ClassValidation && e.MessageContains("head invalid")
}

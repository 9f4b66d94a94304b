package github

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Review states GitHub gives a pull request review.
const (
	ReviewApproved         = "APPROVED"
	ReviewChangesRequested = "CHANGES_REQUESTED"
	ReviewCommented        = "COMMENTED"
	ReviewDismissed        = "DISMISSED"
	ReviewPending          = "PENDING"
)

// Review is one review of a pull request: who, which verdict, and the
// commit it was given on ("" when GitHub no longer knows it).
type Review struct {
	ID       int64
	User     User
	State    string
	CommitID string
}

// ReviewComment is a comment on a pull request's diff: its pull request,
// the file, the line (0: the whole file, or a line that is gone) and the
// diff hunk GitHub shows above it.
type ReviewComment struct {
	ID         int64
	PullNumber int
	Body       string
	User       User
	Path       string
	Line       int
	DiffHunk   string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

type reviewJSON struct {
	ID       int64     `json:"id"`
	User     *userJSON `json:"user"`
	State    string    `json:"state"`
	CommitID *string   `json:"commit_id"`
}

func (j *reviewJSON) review() (Review, bool) {
	r := Review{ID: j.ID, State: j.State}
	var ok bool
	if r.User, ok = j.User.user(); !ok || r.ID <= 0 || r.ID > maxGitHubID {
		return Review{}, false
	}
	switch r.State {
	case ReviewApproved, ReviewChangesRequested, ReviewCommented, ReviewDismissed, ReviewPending:
	default:
		return Review{}, false
	}
	if j.CommitID != nil {
		if !ident.ValidSHA(*j.CommitID) {
			return Review{}, false
		}
		r.CommitID = *j.CommitID
	}
	return r, true
}

// ParseReviews decodes a page of a pull request's reviews: each needs an
// id in range, a known state and, when named, a full commit SHA, else the
// whole page is refused.
func ParseReviews(body []byte) ([]Review, error) {
	var list []reviewJSON
	if json.Unmarshal(body, &list) != nil || list == nil {
		return nil, errMalformedList
	}
	out := make([]Review, 0, len(list))
	for i := range list {
		r, ok := list[i].review()
		if !ok {
			return nil, errMalformedList
		}
		out = append(out, r)
	}
	return out, nil
}

// ListReviews reads every review of pull request number, oldest first
// (GET /repos/{o}/{r}/pulls/{n}/reviews, pages of 100, at most 1,000):
// the first page conditionally when etag is set (NotModified: nothing
// changed since, and a 304 of an authorized read costs nothing), the
// others, when the first is full, without. A rate limit fails at once as
// ClassRateLimited with RetryAfter.
func (c *Client) ListReviews(ctx context.Context, token *Token, owner, repo string, number int, etag string) (*Page[Review], error) {
	const op = "list_reviews"
	if !validRepo(owner, repo, token) || number <= 0 || number > maxGitHubID || !boundedToken(etag, maxETagBytes) {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	path := "/repos/" + owner + "/" + repo + "/pulls/" + strconv.Itoa(number) + "/reviews"
	resp, err := c.getOnce(ctx, op, token, path, url.Values{"per_page": {strconv.Itoa(FeedPerPage)}}, etag)
	if err != nil {
		return nil, err
	}
	p := &Page[Review]{Rate: rateOf(resp.header), ETag: etagOf(resp, etag)}
	if resp.status == http.StatusNotModified {
		p.NotModified = true
		return p, nil
	}
	if p.Items, err = ParseReviews(resp.body); err != nil || len(p.Items) > FeedPerPage {
		return nil, &APIError{Op: op, Status: resp.status, Class: ClassMalformed}
	}
	if len(p.Items) < FeedPerPage && !hasNextPage(resp.header.Values("Link")) {
		return p, nil
	}
	// More than one page: read them all again, so the list is one view.
	all, err := pages(ctx, c, op, token, path, nil, ParseReviews)
	if err != nil {
		return nil, err
	}
	p.Items = all
	return p, nil
}

type reviewCommentJSON struct {
	ID             int64     `json:"id"`
	Body           *string   `json:"body"`
	User           *userJSON `json:"user"`
	Path           string    `json:"path"`
	Line           *int      `json:"line"`
	DiffHunk       string    `json:"diff_hunk"`
	PullRequestURL string    `json:"pull_request_url"`
	CreatedAt      string    `json:"created_at"`
	UpdatedAt      string    `json:"updated_at"`
}

// maxReviewCommentPart bounds a review comment's path and diff hunk as
// read (the instruction frame cuts them much shorter).
const maxReviewCommentPart = 256 << 10

func (j *reviewCommentJSON) comment(owner, repo string) (ReviewComment, bool) {
	c := ReviewComment{ID: j.ID, Path: j.Path, DiffHunk: j.DiffHunk}
	if j.Body != nil {
		c.Body = *j.Body
	}
	if j.Line != nil {
		c.Line = *j.Line
	}
	var ok bool
	if c.User, ok = j.User.user(); !ok {
		return ReviewComment{}, false
	}
	// pull_request_url is the API URL of the comment's pull request.
	prefix := APIBase + "/repos/" + owner + "/" + repo + "/pulls/"
	if len(j.PullRequestURL) <= len(prefix) || !strings.EqualFold(j.PullRequestURL[:len(prefix)], prefix) {
		return ReviewComment{}, false
	}
	n, err := strconv.Atoi(j.PullRequestURL[len(prefix):])
	created, err1 := time.Parse(time.RFC3339, j.CreatedAt)
	updated, err2 := time.Parse(time.RFC3339, j.UpdatedAt)
	if err != nil || err1 != nil || err2 != nil || n <= 0 || n > maxGitHubID || strconv.Itoa(n) != j.PullRequestURL[len(prefix):] ||
		c.ID <= 0 || c.ID > maxGitHubID || c.Line < 0 || c.Line > maxGitHubID ||
		len(c.Path) > maxReviewCommentPart || len(c.DiffHunk) > maxReviewCommentPart {
		return ReviewComment{}, false
	}
	c.PullNumber, c.CreatedAt, c.UpdatedAt = n, created.UTC(), updated.UTC()
	return c, true
}

// ParseReviewComments decodes a page of owner/repo's review comments;
// each names its pull request by the API URL of owner/repo's pull
// request.
func ParseReviewComments(body []byte, owner, repo string) ([]ReviewComment, error) {
	var list []reviewCommentJSON
	if json.Unmarshal(body, &list) != nil || list == nil {
		return nil, errMalformedList
	}
	out := make([]ReviewComment, 0, len(list))
	for i := range list {
		c, ok := list[i].comment(owner, repo)
		if !ok {
			return nil, errMalformedList
		}
		out = append(out, c)
	}
	return out, nil
}

// ListReviewCommentsSince reads the first page of the review comments on
// all of owner/repo's pull requests updated at or after since, oldest
// change first (GET
// /repos/{o}/{r}/pulls/comments?sort=updated&direction=asc&since=), like
// ListIssueCommentsSince.
func (c *Client) ListReviewCommentsSince(ctx context.Context, token *Token, owner, repo string, since time.Time, perPage int, etag string) (*Page[ReviewComment], error) {
	return readFeed(ctx, c, "list_review_comments", token, owner, repo, "/pulls/comments", nil, since, perPage, etag,
		func(b []byte) ([]ReviewComment, error) { return ParseReviewComments(b, owner, repo) })
}

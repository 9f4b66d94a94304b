package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Merge merges pull request number with merge_method "merge" only if its
// head is exactly sha (PUT …/pulls/{n}/merge). It is never retried after
// an uncertain outcome: the caller asks Merged before trying again. A 409
// (the head is no longer sha) is ClassConflict; a 405 (not mergeable,
// protection, review, merge queue) is Status 405, ClassUnexpected, and
// BaseModified tells the one 405 that is worth a retry; 200 with
// "merged": false is ClassNotMerged.
func (c *Client) Merge(ctx context.Context, token *Token, owner, repo string, number int, sha string) (mergeSHA string, err error) {
	const op = "merge_pull"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || number <= 0 || !ident.ValidSHA(sha) || token == nil {
		return "", &APIError{Op: op, Class: ClassMalformed}
	}
	req := struct {
		SHA         string `json:"sha"`
		MergeMethod string `json:"merge_method"`
	}{sha, "merge"}
	r, err := c.do(ctx, call{op: op, method: http.MethodPut, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/pulls/" + strconv.Itoa(number) + "/merge",
		body: req, want: []int{http.StatusOK}, mutation: true})
	if err != nil {
		return "", err
	}
	var body struct {
		SHA    string `json:"sha"`
		Merged bool   `json:"merged"`
	}
	if err := decode(op, r, &body); err != nil {
		return "", err
	}
	if !body.Merged {
		// GitHub answered, and did not merge: a refusal, never a
		// malformed answer to retry.
		return "", &APIError{Op: op, Status: r.status, Class: ClassNotMerged}
	}
	if !ident.ValidSHA(body.SHA) {
		return "", &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return body.SHA, nil
}

// Merged asks whether pull request number is merged (GET …/merge: 204
// yes, 404 no).
func (c *Client) Merged(ctx context.Context, token *Token, owner, repo string, number int) (bool, error) {
	const op = "pull_merged"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) || number <= 0 || token == nil {
		return false, &APIError{Op: op, Class: ClassMalformed}
	}
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, auth: token.value,
		path: "/repos/" + owner + "/" + repo + "/pulls/" + strconv.Itoa(number) + "/merge",
		want: []int{http.StatusNoContent, http.StatusNotFound}, retryUncertain: true})
	if err != nil {
		return false, err
	}
	return r.status == http.StatusNoContent, nil
}

// BaseModified reports whether err is GitHub's 405 "Base branch was
// modified": the base moved while GitHub merged, and a new try (after
// re-reading the pull request) may succeed. Every other 405 is final.
func BaseModified(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusMethodNotAllowed && e.MessageContains("Base branch was modified")
}

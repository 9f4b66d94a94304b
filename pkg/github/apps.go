package github

import (
	"context"
	"crypto/rsa"
	"github.com/0k-lab/agent-forge/pkg/ident"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Permission names and the only level this client asks for.
const (
	PermContents     = "contents"
	PermPullRequests = "pull_requests"
	PermWorkflows    = "workflows"
	PermActions      = "actions"
	PermIssues       = "issues"
	Write            = "write"
	Read             = "read"
	// WorkflowsDir is the directory whose changes need workflows: write.
	WorkflowsDir = ".github/workflows"
	// MaxTokenBytes bounds an installation token (the stateless format
	// embeds a JWT and is much longer than 40 bytes).
	MaxTokenBytes = 8 << 10
)

// Permissions maps a permission name to its level.
type Permissions map[string]string

// DerivePermissions returns exactly what pushing a branch and opening its
// pull request need: contents and pull_requests write, plus workflows
// write when a changed path is .github/workflows or below it.
func DerivePermissions(changed []string) Permissions {
	p := Permissions{PermContents: Write, PermPullRequests: Write}
	for _, path := range changed {
		if TouchesWorkflows(path) {
			p[PermWorkflows] = Write
			break
		}
	}
	return p
}

// TouchesWorkflows reports whether a repository-relative path is the
// workflows directory or inside it.
func TouchesWorkflows(path string) bool {
	return path == WorkflowsDir || strings.HasPrefix(path, WorkflowsDir+"/")
}

// Installation is the App's installation on one repository.
type Installation struct {
	ID          int64
	Permissions Permissions // what the installation holds
}

// App is a GitHub App's identity: its ID (or client ID) and private key.
// Calls made as the App sign a fresh JWT (AppJWT) for every attempt.
type App struct {
	ID  string
	Key *rsa.PrivateKey
}

func (c *Client) signer(a App) func() (string, error) {
	return func() (string, error) { return AppJWT(a.Key, a.ID, c.now()) }
}

func fixedJWT(jwt string) func() (string, error) {
	return func() (string, error) { return jwt, nil }
}

// Installation returns the App's installation on owner/repo, authenticated
// with the App JWT. A 404 (the App is not installed there) is ClassNotFound.
func (c *Client) Installation(ctx context.Context, jwt, owner, repo string) (*Installation, error) {
	return c.installation(ctx, fixedJWT(jwt), owner, repo)
}

// InstallationAs is Installation signing a fresh JWT as app for every
// attempt (so waiting out limits cannot outlast the JWT).
func (c *Client) InstallationAs(ctx context.Context, app App, owner, repo string) (*Installation, error) {
	return c.installation(ctx, c.signer(app), owner, repo)
}

func (c *Client) installation(ctx context.Context, sign func() (string, error), owner, repo string) (*Installation, error) {
	const op = "installation"
	if !ident.ValidGitHubOwner(owner) || !ident.ValidGitHubRepo(repo) {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	r, err := c.do(ctx, call{op: op, method: http.MethodGet, sign: sign,
		path: "/repos/" + owner + "/" + repo + "/installation", want: []int{http.StatusOK}, retryUncertain: true})
	if err != nil {
		return nil, err
	}
	var body struct {
		ID          int64             `json:"id"`
		Permissions map[string]string `json:"permissions"`
	}
	if err := decode(op, r, &body); err != nil {
		return nil, err
	}
	if body.ID <= 0 {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	return &Installation{ID: body.ID, Permissions: body.Permissions}, nil
}

// Token is an installation access token. Its value is reachable only
// through Value; formatting a Token prints Redacted.
type Token struct {
	value       string
	ExpiresAt   time.Time
	Permissions Permissions
}

// Value returns the secret token.
func (t *Token) Value() string { return t.value }

func (t *Token) String() string   { return Redacted }
func (t *Token) GoString() string { return Redacted }

// CreateToken mints an installation token for the one repository repo
// (a bare name) with exactly perms, and verifies GitHub granted exactly
// that: the same permissions (plus only the metadata: read GitHub adds to
// every repository token), that single repository (names compare without
// case, as on GitHub), and an expiry in the future. A permission the installation lacks is ClassValidation
// (GitHub's 422).
func (c *Client) CreateToken(ctx context.Context, jwt string, installationID int64, repo string, perms Permissions) (*Token, error) {
	return c.createToken(ctx, fixedJWT(jwt), installationID, repo, perms)
}

// CreateTokenAs is CreateToken signing a fresh JWT as app for every
// attempt.
func (c *Client) CreateTokenAs(ctx context.Context, app App, installationID int64, repo string, perms Permissions) (*Token, error) {
	return c.createToken(ctx, c.signer(app), installationID, repo, perms)
}

func (c *Client) createToken(ctx context.Context, sign func() (string, error), installationID int64, repo string, perms Permissions) (*Token, error) {
	const op = "create_token"
	if installationID <= 0 || !ident.ValidGitHubRepo(repo) || len(perms) == 0 {
		return nil, &APIError{Op: op, Class: ClassMalformed}
	}
	req := struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}{[]string{repo}, perms}
	// A repeated mint after a lost response only leaves an unused token
	// that expires within the hour, so uncertain failures are retried.
	r, err := c.do(ctx, call{op: op, method: http.MethodPost, sign: sign,
		path: "/app/installations/" + strconv.FormatInt(installationID, 10) + "/access_tokens",
		body: req, want: []int{http.StatusCreated}, mutation: true, retryUncertain: true})
	if err != nil {
		return nil, err
	}
	var body struct {
		Token        string            `json:"token"`
		ExpiresAt    string            `json:"expires_at"`
		Permissions  map[string]string `json:"permissions"`
		Repositories []struct {
			Name string `json:"name"`
		} `json:"repositories"`
	}
	if err := decode(op, r, &body); err != nil {
		return nil, err
	}
	if !validToken(body.Token) {
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	tok := &Token{value: body.Token, Permissions: body.Permissions}
	exp, err := time.Parse(time.RFC3339, body.ExpiresAt)
	if err != nil || !exp.After(c.now()) {
		c.Revoke(ctx, tok)
		return nil, &APIError{Op: op, Status: r.status, Class: ClassMalformed}
	}
	tok.ExpiresAt = exp
	if !grantMatches(perms, body.Permissions) ||
		len(body.Repositories) != 1 || !strings.EqualFold(body.Repositories[0].Name, repo) {
		c.Revoke(ctx, tok)
		return nil, ErrPermissionsMismatch
	}
	return tok, nil
}

// Revoke invalidates the token (DELETE /installation/token, 204). A
// token that is already invalid (401) counts as revoked.
func (c *Client) Revoke(ctx context.Context, t *Token) error {
	const op = "revoke_token"
	if t == nil || t.value == "" {
		return nil
	}
	_, err := c.do(ctx, call{op: op, method: http.MethodDelete, auth: t.value,
		path: "/installation/token", want: []int{http.StatusNoContent, http.StatusUnauthorized},
		mutation: true, retryUncertain: true})
	return err
}

// PermMetadata is the read-only permission GitHub attaches to every token
// that reaches a repository, whether or not it was requested.
const PermMetadata = "metadata"

// grantMatches reports whether the permissions GitHub granted are exactly
// the requested ones, allowing only GitHub's implicit metadata: read on
// top (unless metadata was itself requested, then it must match).
func grantMatches(requested Permissions, granted map[string]string) bool {
	if _, asked := requested[PermMetadata]; !asked && granted[PermMetadata] == "read" {
		granted = maps.Clone(granted)
		delete(granted, PermMetadata)
	}
	return maps.Equal(map[string]string(requested), granted)
}

func validToken(s string) bool {
	if s == "" || len(s) > MaxTokenBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

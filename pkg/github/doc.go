// Package github is Agent Forge's GitHub client: GitHub App
// authentication, the few REST calls publication and delivery need, and
// the isolated credentialed push. forge-github and the Gate's automatic
// delivery both use it.
//
// # Endpoints
//
// The client talks only to APIBase (https://api.github.com) and pushes
// only to GitBase (https://github.com). Neither is configurable: the
// seams are the HTTP transport handed to New (tests pass an in-process
// one) and, for git, the host's name resolution and CA bundle.
//
// # Authentication
//
// AppJWT signs an RS256 JWT with the App's RSA key (ParsePrivateKey takes
// PKCS#1 or PKCS#8 PEM): integer iat one minute in the past, integer exp
// nine minutes ahead (GitHub refuses more than ten, and clocks drift),
// iss the App ID. InstallationAs and CreateTokenAs sign a fresh one for
// every attempt (waiting out limits can outlast a JWT); Installation and
// CreateToken take one already signed. With it, Installation finds the App's installation on
// one repository (404: not installed) and CreateToken mints an
// installation token for exactly that repository with exactly the
// permissions asked for; DerivePermissions gives them: contents and
// pull_requests write, plus workflows write only when a changed path is
// under .github/workflows. The permissions and repositories GitHub
// returns must equal the request, apart from the metadata: read GitHub
// adds to every repository token (else ErrPermissionsMismatch and the
// token is revoked). Revoke ends a token (DELETE /installation/token).
//
// # Issues (intake)
//
// For the Gate's intake (DECISIONS 17) the client reads the repository-wide
// issue and issue-comment feeds (ListIssuesSince, ListIssueCommentsSince:
// updated since a time, oldest change first, one page per call,
// conditional on an ETag, a limit failing at once with RetryAfter for the
// poller to schedule), one issue (GetIssue: title, body and updated_at of
// one answer), an issue's events and comments (IssueEvents, IssueComments:
// every page, at most 1,000, never a partial view), a user's collaborator
// permission (Permission; 404 answers none), a branch's head (BranchHead),
// the App's slug (AppSlugAs: its bot is slug[bot]), and writes reactions
// (AddReaction: a repeat is GitHub's 200) and comments (CreateIssueComment,
// never repeated after an uncertain outcome; EditIssueComment, repeated).
// An answer over MaxResponseBytes is ClassTooLarge and never retried; a
// feed reader asks for smaller pages instead.
//
// For iteration on delivered pull requests (DECISIONS 18) it reads the
// repository-wide review-comment feed (ListReviewCommentsSince, like the
// issue-comment feed: each comment with its pull request, file, line and
// diff hunk) and a pull request's reviews (ListReviews: the first page
// conditionally, every page when there are more; each review's state and
// commit), which the merge policy "review" weighs.
//
// # Limits and retries
//
// Every call is bounded: request time, response size (MaxResponseBytes),
// attempts (DefaultAttempts). A 403 or 429 that is a rate limit waits
// retry-after when given, else until x-ratelimit-reset when
// x-ratelimit-remaining is 0, else (a secondary limit) at least a minute
// with backoff; a wait longer than the client's MaxWait fails the call
// as ClassRateLimited. A 403 "Resource not accessible by integration" is
// ClassPermission, never a limit. Reads and idempotent calls are retried
// after a 5xx or a lost response; creating a pull request is not (the
// server may have acted): the caller reads the branch's PRs and decides.
// Mutations are serialized and spaced at least a second apart.
//
// # Errors
//
// *APIError carries an operation name, the status and a Class. GitHub's
// message is kept privately (redacted) for MessageContains and never
// reaches Error(). Redact removes token-looking strings (ghs_…, ghp_…,
// github_pat_…, JWTs) and known secret values from any text a caller
// logs. A *Token formats as "[redacted]"; only Value returns the secret.
//
// # Push
//
// A Mirror is a fresh private bare repository. Copy fetches exactly the
// named refs into it from the local repository; RemoteBranch, Fetch and
// PushNew run git there with the token handed to git's one credential
// helper through a FIFO inside the mirror (credentialed): never in argv,
// the environment (/proc/<pid>/cmdline and environ), a remote URL or a
// file at rest; HTTPS allowed for that command, redirects off. PushNew
// creates the branch with a lease that requires it to be absent, over
// protocol v2 with push.negotiate (only what GitHub lacks is sent).
// GitHub's refusal of a workflow change without the workflows permission
// is ErrWorkflowsRefused; a refusal by branch protection or a ruleset is
// ErrPushRejected. WorkflowsChanged asks git whether a commit changes
// .github/workflows without listing paths.
package github

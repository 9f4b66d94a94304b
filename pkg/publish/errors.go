package publish

// Code is a stable, value-free refusal or failure code. Codes are part of
// forge-github's contract (docs/forge-github.md).
type Code string

// Stage groups codes by what the failure means for the caller; each
// stage is one exit code of forge-github.
type Stage int

// Stages.
const (
	// StageConfig: the config, key, git or repository is unusable;
	// nothing was done.
	StageConfig Stage = 1
	// StageRefused: the publication does not match the local repository
	// or GitHub's state; nothing was changed on GitHub.
	StageRefused Stage = 3
	// StageGitHub: GitHub refused or failed; the branch may exist, and
	// repeating the same publication is safe.
	StageGitHub Stage = 4
)

// Codes.
const (
	CodeConfigUnreadable  Code = "config_unreadable"
	CodeConfigUnsafe      Code = "config_unsafe"
	CodeConfigInvalid     Code = "config_invalid"
	CodeAPIBaseRefused    Code = "api_base_refused"
	CodeKeyUnsafe         Code = "key_unsafe"
	CodeKeyInvalid        Code = "key_invalid"
	CodeAppIDInvalid      Code = "app_id_invalid"
	CodeGitUnsafe         Code = "git_unsafe"
	CodeRepositoryUnsafe  Code = "repository_unsafe"
	CodeTempUnavailable   Code = "temp_unavailable"
	CodePublicationBad    Code = "publication_invalid"
	CodeWorktreeDirty     Code = "worktree_dirty"
	CodeBaseDrift         Code = "base_drift"
	CodeCandidateMismatch Code = "candidate_mismatch"
	CodeTreeMismatch      Code = "tree_mismatch"
	CodeParentMismatch    Code = "parent_mismatch"
	CodeGitFailed         Code = "git_failed"
	CodeBranchConflict    Code = "branch_conflict"
	CodePRClosed          Code = "pr_closed"
	CodePRConflict        Code = "pr_conflict"
	CodeNotInstalled      Code = "installation_not_found"
	CodeAppUnauthorized   Code = "app_unauthorized"
	CodePermissionDenied  Code = "permission_denied"
	CodePermissionsWrong  Code = "permissions_mismatch"
	CodeRateLimited       Code = "rate_limited"
	CodeAPIFailed         Code = "api_failed"
	CodeWorkflowsRefused  Code = "push_workflows_refused"
	CodePushFailed        Code = "push_failed"
	CodePushRejected      Code = "push_rejected"
	CodeFetchFailed       Code = "fetch_failed"
	CodePRRefused         Code = "pr_refused"
	CodeSecretInCandidate Code = "secret_in_candidate"
)

// Description is the fixed text printed after a code.
func (c Code) Description() string {
	switch c {
	case CodeConfigUnreadable:
		return "the config file cannot be opened or read"
	case CodeConfigUnsafe:
		return "the config file must be an owned regular 0600 file in an owned directory that is not group/world writable"
	case CodeConfigInvalid:
		return "the config is not valid forge-github config version 1"
	case CodeAPIBaseRefused:
		return "api_base must be https://api.github.com"
	case CodeKeyUnsafe:
		return "the private key must be an owned regular 0600 file in an owned directory that is not group/world writable"
	case CodeKeyInvalid:
		return "the private key is not a single unencrypted RSA key (PKCS#1 or PKCS#8) of at least 2048 bits"
	case CodeAppIDInvalid:
		return "the App ID environment variable is unset or not an App ID or client ID"
	case CodeGitUnsafe:
		return "git_executable must be the canonical absolute path of an owned executable regular file; it and its directory must not be group/world writable"
	case CodeRepositoryUnsafe:
		return "local_repository must be the canonical path of an owned worktree (with a .git directory) that is not group/world writable"
	case CodeTempUnavailable:
		return "a private temporary directory cannot be created"
	case CodePublicationBad:
		return "the publication on stdin is not valid publication version 1"
	case CodeWorktreeDirty:
		return "the local worktree has changes or untracked files"
	case CodeBaseDrift:
		return "expected_parent_sha is not the local base branch, or GitHub's base branch does not contain it"
	case CodeCandidateMismatch:
		return "candidate_ref does not point to candidate_sha (locally or in the private copy)"
	case CodeTreeMismatch:
		return "the candidate's tree is not expected_tree_sha"
	case CodeParentMismatch:
		return "the candidate's only parent is not expected_parent_sha"
	case CodeGitFailed:
		return "a local git command failed"
	case CodeBranchConflict:
		return "new_branch already exists on GitHub at another commit"
	case CodePRClosed:
		return "a closed or merged pull request exists for new_branch; it is final"
	case CodePRConflict:
		return "an open pull request for new_branch does not match the candidate and base"
	case CodeNotInstalled:
		return "the GitHub App is not installed on the repository"
	case CodeAppUnauthorized:
		return "GitHub refused the App's credentials"
	case CodePermissionDenied:
		return "the installation does not hold the permissions this publication needs"
	case CodePermissionsWrong:
		return "GitHub granted a token whose permissions or repositories differ from the request"
	case CodeRateLimited:
		return "GitHub's rate limits outlasted the bounded retries"
	case CodeAPIFailed:
		return "a GitHub API call failed"
	case CodeWorkflowsRefused:
		return "GitHub refused the push: workflow changes need the workflows permission"
	case CodePushFailed:
		return "the push to GitHub failed"
	case CodePushRejected:
		return "GitHub's branch protection or rulesets refused the push"
	case CodeFetchFailed:
		return "reading the base branch from GitHub failed"
	case CodePRRefused:
		return "GitHub refused to create the pull request"
	case CodeSecretInCandidate:
		return "the candidate holds the App's private key or its installation token (as is or encoded); nothing was pushed"
	}
	return "unknown failure"
}

// Error is a failed publication: a code and its stage, and for a config
// error the value-free detail of pkg/configfile (field and reason).
// Error() never holds a value.
type Error struct {
	Code   Code
	Stage  Stage
	Detail string
}

func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Code.Description()
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

func fail(stage Stage, code Code) error { return &Error{Code: code, Stage: stage} }

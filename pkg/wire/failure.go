package wire

// Failure codes a Worker may report in a failed result. The table is
// closed: each code has exactly one disposition, a Worker sends the code
// with that disposition, and Gate refuses (reject invalid) any other code
// or a mismatched disposition. Gate persists the code on the attempt, and
// on the job when the disposition is terminal. Gate-only codes
// (max_attempts_exceeded, lease_expired) are never valid here.
const (
	// Retryable: running the attempt again may succeed.
	FailureExecution               = "execution_failed"            // generic work failure
	FailurePluginProtocolViolation = "plugin_protocol_violation"   // invalid frame, bad exit, trailing output
	FailurePluginFailed            = "plugin_failed"               // the plugin answered with a failure frame
	FailurePluginTimeout           = "plugin_timeout"              // plugin_timeout elapsed
	FailurePluginOutputLimit       = "plugin_output_limit"         // plugin_output_bytes exceeded
	FailurePluginSpawnFailed       = "plugin_spawn_failed"         // the plugin process could not be started
	FailureWorkerShutdown          = "worker_shutdown"             // the Worker stopped while the attempt ran
	FailurePreparation             = "preparation_failed"          // coding: worktree or git failed while preparing
	FailureWorkspaceValidation     = "workspace_validation_failed" // coding: git failed while validating the workspace
	FailureCommit                  = "commit_failed"               // coding: candidate commit or ref could not be created

	// Terminal: running the same job again cannot help.
	FailureInvalidTask            = "invalid_task"              // the task does not decode or is unusable
	FailureScopedTestFailed       = "scoped_test_failed"        // coding: a scoped check did not pass
	FailurePluginIdentityMismatch = "plugin_identity_mismatch"  // the plugin no longer matches its pinned digest
	FailurePolicyExceedsCeiling   = "policy_exceeds_ceiling"    // a policy limit is above the Worker's ceiling
	FailureEnvironmentNotAllowed  = "environment_not_allowed"   // the policy asks for a variable outside the allowlist
	FailureUnknownPlugin          = "unknown_plugin"            // the policy names a plugin the Worker lacks
	FailureInvalidPolicy          = "invalid_policy"            // the policy does not decode
	FailureUnsupportedKind        = "unsupported_kind"          // a job kind the Worker cannot run
	FailureRepositoryUnavailable  = "repository_unavailable"    // coding: no repository roots, unknown repository, path drift
	FailureDefaultBranchMismatch  = "default_branch_mismatch"   // coding: the repository's default branch is not the expected one
	FailureInvalidBase            = "invalid_base"              // coding: base missing or not on the default branch
	FailureWorkspaceViolation     = "workspace_violation"       // coding: HEAD, refs, Git config or metadata touched, or a path escapes
	FailureEmptyChange            = "empty_change"              // coding: the staged tree equals the base tree
	FailureCommitIdentity         = "commit_identity_mismatch"  // coding: git would alter the requested author identity
	FailureInvalidActivity        = "invalid_activity"          // the lease selects an unknown activity version or carries an activity payload
	FailureRepositoryOutOfService = "repository_out_of_service" // coding: a change to the operator's repository could not be undone
	FailurePluginIncompatible     = "plugin_incompatible"       // the plugin answered failure incompatible: its agent is misconfigured here (missing executable, invalid profile, refused credentials)
	FailureCandidateTooLarge      = "candidate_too_large"       // coding: the candidate bundle is past the Gate's candidate_bundle_bytes
	FailureCandidateRefused       = "candidate_refused"         // coding: the Gate's verification of the candidate bundle refused it
	FailureSecretInCandidate      = "secret_in_candidate"       // coding: a secret the Worker holds is in the change, the commit subject, the agent report or the evidence
	FailureBudgetExceeded         = "budget_exceeded"           // the model gateway refused a request past the attempt's budget, or the job's budget was spent
)

// DispositionOf returns the fixed disposition of a Worker failure code and
// whether the code is in the table.
func DispositionOf(code string) (Disposition, bool) {
	switch code {
	case FailureExecution, FailurePluginProtocolViolation, FailurePluginFailed, FailurePluginTimeout,
		FailurePluginOutputLimit, FailurePluginSpawnFailed, FailureWorkerShutdown,
		FailurePreparation, FailureWorkspaceValidation, FailureCommit:
		return DispositionRetryable, true
	case FailureInvalidTask, FailureScopedTestFailed, FailurePluginIdentityMismatch, FailurePolicyExceedsCeiling,
		FailureEnvironmentNotAllowed, FailureUnknownPlugin, FailureInvalidPolicy, FailureUnsupportedKind,
		FailureRepositoryUnavailable, FailureDefaultBranchMismatch, FailureInvalidBase,
		FailureWorkspaceViolation, FailureEmptyChange, FailureCommitIdentity, FailureInvalidActivity,
		FailureRepositoryOutOfService, FailurePluginIncompatible, FailureCandidateTooLarge, FailureCandidateRefused,
		FailureSecretInCandidate, FailureBudgetExceeded:
		return DispositionTerminal, true
	}
	return "", false
}

// FailureCodes returns every code of the table (a fresh slice), retryable
// codes first.
func FailureCodes() []string {
	return []string{
		FailureExecution, FailurePluginProtocolViolation, FailurePluginFailed, FailurePluginTimeout,
		FailurePluginOutputLimit, FailurePluginSpawnFailed, FailureWorkerShutdown,
		FailurePreparation, FailureWorkspaceValidation, FailureCommit,
		FailureInvalidTask, FailureScopedTestFailed, FailurePluginIdentityMismatch, FailurePolicyExceedsCeiling,
		FailureEnvironmentNotAllowed, FailureUnknownPlugin, FailureInvalidPolicy, FailureUnsupportedKind,
		FailureRepositoryUnavailable, FailureDefaultBranchMismatch, FailureInvalidBase,
		FailureWorkspaceViolation, FailureEmptyChange, FailureCommitIdentity, FailureInvalidActivity,
		FailureRepositoryOutOfService, FailurePluginIncompatible, FailureCandidateTooLarge, FailureCandidateRefused,
		FailureSecretInCandidate, FailureBudgetExceeded,
	}
}

// CheckFailure reports whether (code, disposition) is a row of the table.
// A well-formed failed result whose pair is not is refused by Gate with
// reject invalid (not a protocol violation: a newer Worker may know codes
// this Gate does not).
func CheckFailure(code string, d Disposition) error {
	want, ok := DispositionOf(code)
	if !ok {
		return fieldErr("result.failure_code", "unknown failure code")
	}
	if d != want {
		return fieldErr("result.disposition", "does not match the failure code")
	}
	return nil
}

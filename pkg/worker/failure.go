package worker

import (
	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Worker failure codes. Each is a fixed, bounded string that is safe to send
// to Gate and to log: it says what kind of thing went wrong, never with
// which values. Every code is a row of the wire protocol's closed failure
// table (wire.DispositionOf), which fixes its disposition; the result
// carries the code itself.
const (
	// Retryable: the attempt may succeed when run again.
	CodePluginProtocolViolation = wire.FailurePluginProtocolViolation // invalid frame, bad exit, trailing output
	CodePluginFailed            = wire.FailurePluginFailed            // the plugin answered with a failure frame
	CodePluginTimeout           = wire.FailurePluginTimeout           // plugin_timeout elapsed
	CodePluginOutputLimit       = wire.FailurePluginOutputLimit       // plugin_output_bytes exceeded
	CodePluginSpawnFailed       = wire.FailurePluginSpawnFailed       // the process or runtime dir could not be created
	CodeWorkerShutdown          = wire.FailureWorkerShutdown          // the Worker stopped while the attempt ran
	CodeExecutionFailed         = wire.FailureExecution               // processes of the attempt survived their cgroup's kill

	// Terminal: running the same job again here cannot help.
	CodePluginIdentityMismatch = wire.FailurePluginIdentityMismatch // executable no longer matches its pinned sha256
	CodePolicyExceedsCeiling   = wire.FailurePolicyExceedsCeiling   // a Gate limit is above this Worker's ceiling
	CodeEnvironmentNotAllowed  = wire.FailureEnvironmentNotAllowed  // the policy asks for a variable outside environment_allowlist
	CodeUnknownPlugin          = wire.FailureUnknownPlugin          // the policy names a plugin this Worker lacks
	CodeInvalidPolicy          = wire.FailureInvalidPolicy          // the lease's policy does not decode
	CodeInvalidTask            = wire.FailureInvalidTask            // the lease's task does not decode
	CodeUnsupportedKind        = wire.FailureUnsupportedKind        // a job kind this Worker cannot run yet
	CodeInvalidActivity        = wire.FailureInvalidActivity        // the lease selects an unknown activity version or carries an activity payload
	CodePluginIncompatible     = wire.FailurePluginIncompatible     // the plugin answered failure incompatible (its agent is misconfigured)
	CodeBudgetExceeded         = wire.FailureBudgetExceeded         // the gateway refused a request past the attempt's budget
)

// wireFailure returns the disposition and code a failed result carries for
// code. Every Worker code is in the wire table; a code that is not (a
// programming error) is sent as retryable execution_failed rather than as
// a pair Gate would refuse.
func wireFailure(code string) (wire.Disposition, string) {
	if d, ok := wire.DispositionOf(code); ok {
		return d, code
	}
	return wire.DispositionRetryable, wire.FailureExecution
}

// codingCode returns the wire failure code of a coding-pipeline failure
// recorded as (phase, reason); class is the retryable or terminal code the
// pipeline step chose, returned as is when the pair has no specific code.
func codingCode(p evidence.Phase, r evidence.Reason, class string) string {
	switch p {
	case evidence.PhasePreparation:
		switch r {
		case evidence.ReasonNoRepositoryRoots, evidence.ReasonUnknownRepository, evidence.ReasonRepositoryPathDrift:
			return wire.FailureRepositoryUnavailable
		case evidence.ReasonDefaultBranchMismatch:
			return wire.FailureDefaultBranchMismatch
		case evidence.ReasonBaseMissing, evidence.ReasonBaseNotOnDefaultBranch:
			return wire.FailureInvalidBase
		case evidence.ReasonWorktreeFailed, evidence.ReasonGitFailed:
			return wire.FailurePreparation
		}
	case evidence.PhaseWorkspaceValidation:
		switch r {
		case evidence.ReasonGitFailed:
			return wire.FailureWorkspaceValidation
		case evidence.ReasonEmptyChange:
			return wire.FailureEmptyChange
		case evidence.ReasonSecretInCandidate:
			return wire.FailureSecretInCandidate
		case evidence.ReasonHeadMoved, evidence.ReasonRefsChanged, evidence.ReasonConfigChanged,
			evidence.ReasonGitDirChanged, evidence.ReasonPathEscape:
			return wire.FailureWorkspaceViolation
		}
	case evidence.PhaseCandidateCommit:
		switch r {
		case evidence.ReasonCommitFailed:
			if d, _ := wire.DispositionOf(class); d == wire.DispositionTerminal {
				return wire.FailureCommitIdentity
			}
			return wire.FailureCommit
		case evidence.ReasonRefFailed:
			if class == wire.FailureCandidateTooLarge || class == wire.FailureCandidateRefused {
				return class // the Gate refused the candidate bundle
			}
			return wire.FailureCommit
		}
	}
	return class
}

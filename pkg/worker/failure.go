package worker

import "github.com/0k-lab/agent-forge/pkg/wire"

// Worker failure codes. Each is a fixed, bounded string that is safe to send
// to Gate and to log: it says what kind of thing went wrong, never with
// which values. classOf maps each to the wire failure class that decides
// retryability.
const (
	// Retryable: the attempt may succeed when run again.
	CodePluginProtocolViolation = "plugin_protocol_violation" // invalid frame, bad exit, trailing output
	CodePluginFailed            = "plugin_failed"             // the plugin answered with a failure frame
	CodePluginTimeout           = "plugin_timeout"            // plugin_timeout elapsed
	CodePluginOutputLimit       = "plugin_output_limit"       // plugin_output_bytes exceeded
	CodePluginSpawnFailed       = "plugin_spawn_failed"       // the process or runtime dir could not be created
	CodeWorkerShutdown          = "worker_shutdown"           // the Worker stopped while the attempt ran

	// Terminal: running the same job again here cannot help.
	CodePluginIdentityMismatch = "plugin_identity_mismatch" // executable no longer matches its pinned sha256
	CodePolicyExceedsCeiling   = "policy_exceeds_ceiling"   // a Gate limit is above this Worker's ceiling
	CodeEnvironmentNotAllowed  = "environment_not_allowed"  // the policy asks for a variable outside environment_allowlist
	CodeUnknownPlugin          = "unknown_plugin"           // the policy names a plugin this Worker lacks
	CodeInvalidPolicy          = "invalid_policy"           // the lease's policy does not decode
	CodeInvalidTask            = wire.FailureInvalidTask    // the lease's task does not decode
	CodeUnsupportedKind        = "unsupported_kind"         // a job kind this Worker cannot run yet
)

// classOf returns the wire failure class of a Worker failure code.
func classOf(code string) string {
	switch code {
	case CodePluginIdentityMismatch, CodePolicyExceedsCeiling, CodeEnvironmentNotAllowed,
		CodeUnknownPlugin, CodeInvalidPolicy, CodeInvalidTask, CodeUnsupportedKind:
		return wire.FailureInvalidTask
	default:
		return wire.FailureExecution
	}
}

// wireFailure returns what a failed result carries for code: the code
// itself when the wire protocol knows it, otherwise its class, and the
// disposition the protocol fixes for that.
func wireFailure(code string) (wire.Disposition, string) {
	if d, ok := wire.DispositionOf(code); ok {
		return d, code
	}
	class := classOf(code)
	d, _ := wire.DispositionOf(class)
	return d, class
}

package worker

import (
	"testing"

	"github.com/0k-lab/agent-forge/pkg/evidence"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Every code the Worker can report is a row of the wire table and is sent
// as itself with the table's disposition.
func TestWorkerCodesAreWireCodes(t *testing.T) {
	codes := map[string]wire.Disposition{
		CodePluginProtocolViolation: wire.DispositionRetryable, CodePluginFailed: wire.DispositionRetryable,
		CodePluginTimeout: wire.DispositionRetryable, CodePluginOutputLimit: wire.DispositionRetryable,
		CodePluginSpawnFailed: wire.DispositionRetryable, CodeWorkerShutdown: wire.DispositionRetryable,
		codeCodingRetryable:        wire.DispositionRetryable,
		CodePluginIdentityMismatch: wire.DispositionTerminal, CodePolicyExceedsCeiling: wire.DispositionTerminal,
		CodeEnvironmentNotAllowed: wire.DispositionTerminal, CodeUnknownPlugin: wire.DispositionTerminal,
		CodeInvalidPolicy: wire.DispositionTerminal, CodeInvalidTask: wire.DispositionTerminal,
		CodeUnsupportedKind: wire.DispositionTerminal, CodeScopedTestFailed: wire.DispositionTerminal,
		CodePluginIncompatible: wire.DispositionTerminal,
	}
	for code, want := range codes {
		d, sent := wireFailure(code)
		if d != want || sent != code {
			t.Fatalf("%s sent as %s/%s, want %s/%s", code, d, sent, want, code)
		}
	}
	if d, sent := wireFailure("not_a_code"); d != wire.DispositionRetryable || sent != wire.FailureExecution {
		t.Fatalf("unknown code sent as %s/%s", d, sent)
	}
}

// Coding failures map (phase, reason, class) to a table code whose
// disposition is the class's: a step never turns retryable into terminal
// or back.
func TestCodingCodes(t *testing.T) {
	type row struct {
		p     evidence.Phase
		r     evidence.Reason
		class string
		want  string
	}
	T, R := codeCodingTerminal, codeCodingRetryable
	rows := []row{
		{evidence.PhasePreparation, evidence.ReasonNoRepositoryRoots, T, wire.FailureRepositoryUnavailable},
		{evidence.PhasePreparation, evidence.ReasonUnknownRepository, T, wire.FailureRepositoryUnavailable},
		{evidence.PhasePreparation, evidence.ReasonRepositoryPathDrift, T, wire.FailureRepositoryUnavailable},
		{evidence.PhasePreparation, evidence.ReasonDefaultBranchMismatch, T, wire.FailureDefaultBranchMismatch},
		{evidence.PhasePreparation, evidence.ReasonBaseMissing, T, wire.FailureInvalidBase},
		{evidence.PhasePreparation, evidence.ReasonBaseNotOnDefaultBranch, T, wire.FailureInvalidBase},
		{evidence.PhasePreparation, evidence.ReasonWorktreeFailed, R, wire.FailurePreparation},
		{evidence.PhasePreparation, evidence.ReasonGitFailed, R, wire.FailurePreparation},
		{evidence.PhasePreparation, evidence.ReasonInvalidTask, CodeInvalidTask, CodeInvalidTask},
		{evidence.PhasePreparation, evidence.ReasonInvalidPolicy, CodeInvalidPolicy, CodeInvalidPolicy},
		{evidence.PhasePreparation, evidence.ReasonPolicyRejected, CodeEnvironmentNotAllowed, CodeEnvironmentNotAllowed},
		{evidence.PhasePreparation, evidence.ReasonPluginRejected, CodePluginIdentityMismatch, CodePluginIdentityMismatch},
		{evidence.PhasePlugin, evidence.ReasonTimedOut, CodePluginTimeout, CodePluginTimeout},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonHeadMoved, T, wire.FailureWorkspaceViolation},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonRefsChanged, T, wire.FailureWorkspaceViolation},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonConfigChanged, T, wire.FailureWorkspaceViolation},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonGitDirChanged, T, wire.FailureWorkspaceViolation},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonPathEscape, T, wire.FailureWorkspaceViolation},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonEmptyChange, T, wire.FailureEmptyChange},
		{evidence.PhaseWorkspaceValidation, evidence.ReasonGitFailed, R, wire.FailureWorkspaceValidation},
		{evidence.PhaseCandidateCommit, evidence.ReasonCommitFailed, R, wire.FailureCommit},
		{evidence.PhaseCandidateCommit, evidence.ReasonCommitFailed, T, wire.FailureCommitIdentity},
		{evidence.PhaseCandidateCommit, evidence.ReasonRefFailed, R, wire.FailureCommit},
	}
	for _, r := range rows {
		got := codingCode(r.p, r.r, r.class)
		if got != r.want {
			t.Fatalf("%s/%s/%s -> %s, want %s", r.p, r.r, r.class, got, r.want)
		}
		want, _ := wire.DispositionOf(r.class)
		if d, ok := wire.DispositionOf(got); !ok || d != want {
			t.Fatalf("%s/%s: %s has disposition %s, class %s has %s", r.p, r.r, got, d, r.class, want)
		}
	}
}

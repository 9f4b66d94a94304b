package source

import (
	"errors"

	"github.com/0k-lab/agent-forge/pkg/gitx"
)

// Error is a failed preparation: which phase, a fixed reason word and
// whether the same submit may succeed later. It never holds a path, a
// URL or git's output.
type Error struct {
	Phase     string
	Reason    string
	Retryable bool
}

func (e *Error) Error() string { return "source: " + e.Phase + ": " + e.Reason }

// Phases.
const (
	PhaseClone    = "clone"    // first use: the temporary clone and its installation
	PhaseValidate = "validate" // reuse: the existing bare repository's checks
	PhaseFetch    = "fetch"    // reuse: fetching the default branch
	PhaseBase     = "base"     // the requested base against the fetched branch
	PhaseBundle   = "bundle"   // a base or candidate bundle for a Worker (bundle.go)
	PhaseMaintain = "maintain" // expiring candidate refs and repacking (maintain.go)
)

// Reasons besides the gitx.Transport* words a failed fetch reports.
const (
	ReasonBaseMissing      = "base_missing"               // base is not a commit of the repository
	ReasonBaseNotOnBranch  = "base_not_on_default_branch" // base is not an ancestor of the default branch
	ReasonNotBare          = "not_bare_repository"        // the directory is not a bare repository
	ReasonOriginMismatch   = "origin_mismatch"            // its only remote is not exactly the configured URL
	ReasonUnexpectedConfig = "unexpected_config"          // its config holds a key preparation does not write
	ReasonBranchMismatch   = "head_mismatch"              // its HEAD is not the default branch
	ReasonUnsafeRepository = "unsafe_repository"          // symlink, foreign owner, open permissions, alternates
	ReasonTimeout          = "timeout"                    // a git command ran out of time
	ReasonOutputLimit      = "output_limit"               // a git command wrote too much
	ReasonGitFailed        = "git_failed"                 // a local git command failed
	ReasonLocalFailure     = "local_failure"              // a filesystem operation failed
	ReasonCancelled        = "cancelled"                  // the submit or the Gate stopped waiting
	ReasonFsckFailed       = "fsck_failed"                // upstream sent an object git's strict fsck refuses
)

// retryableTransport says which remote failures may pass on their own.
var retryableTransport = map[string]bool{
	gitx.TransportServerError:  true,
	gitx.TransportUnreachable:  true,
	gitx.TransportOtherFailure: true,
}

// gitError maps a failed git command in phase to an *Error.
func gitError(phase string, err error) error {
	var ge *gitx.Error
	if !errors.As(err, &ge) {
		return &Error{Phase: phase, Reason: ReasonGitFailed, Retryable: true}
	}
	switch {
	case ge.Transport != "":
		return &Error{Phase: phase, Reason: ge.Transport, Retryable: retryableTransport[ge.Transport]}
	case ge.Reason == "timeout":
		return &Error{Phase: phase, Reason: ReasonTimeout, Retryable: true}
	case ge.Reason == "output limit":
		return &Error{Phase: phase, Reason: ReasonOutputLimit}
	case ge.Reason == "cancelled":
		return &Error{Phase: phase, Reason: ReasonCancelled, Retryable: true}
	}
	return &Error{Phase: phase, Reason: ReasonGitFailed, Retryable: true}
}

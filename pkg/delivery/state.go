package delivery

import (
	"errors"
	"time"
)

// Phase is where a delivery is.
type Phase string

// Phases (doc.go).
const (
	PhasePush        Phase = "push"
	PhasePullRequest Phase = "pull_request"
	PhaseCI          Phase = "ci"
	PhaseReview      Phase = "review"
	PhaseMerge       Phase = "merge"
	PhaseMerged      Phase = "merged"
	PhaseFailed      Phase = "failed"
)

// Terminal reports whether p ends the delivery.
func (p Phase) Terminal() bool { return p == PhaseMerged || p == PhaseFailed }

// Valid reports whether p is one of the phases.
func (p Phase) Valid() bool {
	switch p {
	case PhasePush, PhasePullRequest, PhaseCI, PhaseReview, PhaseMerge, PhaseMerged, PhaseFailed:
		return true
	}
	return false
}

// CI states exposed to the owner.
const (
	CIWaiting = "waiting" // no run for the candidate seen yet
	CIPending = "pending" // runs exist, not all completed
	CISuccess = "success"
	CIFailure = "failure"
	CINoRuns  = "no_runs" // none appeared within no_runs_grace
)

// Failure codes: the closed table (docs/delivery.md).
const (
	CodeCIFailed           = "ci_failed"            // a run of the candidate concluded other than success, neutral, skipped
	CodeCITimedOut         = "ci_timed_out"         // the delivery timeout elapsed while runs were still pending
	CodeCINoRuns           = "ci_no_runs"           // no run appeared within no_runs_grace
	CodeHeadMoved          = "head_moved"           // the branch or pull request head is not the candidate (409 included)
	CodeBaseChanged        = "pr_base_changed"      // the branch's pull request targets another base branch
	CodePRClosed           = "pr_closed"            // the pull request was closed without merge
	CodePRRefused          = "pr_refused"           // GitHub refused the pull request (no commits between head and base)
	CodeMergeRefused       = "merge_refused"        // 405, 422 or merged=false: not mergeable, protection, review, merge queue
	CodePermissionDenied   = "permission_denied"    // the App lacks a permission on the repository
	CodeNotInstalled       = "app_not_installed"    // the App is not installed on the repository
	CodeRepositoryNotFound = "repository_not_found" // the repository is not public or does not exist
	CodePushRejected       = "push_rejected"        // the branch exists at another commit, or is protected
	CodeWorkflowPermission = "workflow_permission_denied"
	CodeUnavailable        = "github_unavailable"    // max_attempts transient failures in one phase
	CodeTimedOut           = "delivery_timed_out"    // timeout elapsed outside the ci phase
	CodeUnconfigured       = "delivery_unconfigured" // the Gate restarted without a delivery section
	CodeSecretInCandidate  = "secret_in_candidate"   // the candidate holds a secret of the Gate's (a token, the App key): never pushed
	CodeBaseMoved          = "base_moved"            // a follow-up's branch is no longer at its base: someone pushed; nothing pushed
	CodeSuperseded         = "superseded"            // a follow-up job took the pull request over (written by the store)
	CodeCancelled          = "cancelled"             // a person removed the label or closed the pull request (written by the store)
)

// Codes is the closed failure-code table.
var codes = map[string]bool{
	CodeCIFailed: true, CodeCITimedOut: true, CodeCINoRuns: true, CodeHeadMoved: true, CodeBaseChanged: true,
	CodePRClosed: true, CodePRRefused: true, CodeMergeRefused: true, CodePermissionDenied: true,
	CodeNotInstalled: true, CodeRepositoryNotFound: true, CodePushRejected: true,
	CodeWorkflowPermission: true, CodeUnavailable: true, CodeTimedOut: true, CodeUnconfigured: true,
	CodeSecretInCandidate: true, CodeBaseMoved: true, CodeSuperseded: true, CodeCancelled: true,
}

// ValidCode reports whether c is in the failure-code table.
func ValidCode(c string) bool { return codes[c] }

// ValidCIState reports whether c is a CI state ("" included: not polled).
func ValidCIState(c string) bool {
	switch c {
	case "", CIWaiting, CIPending, CISuccess, CIFailure, CINoRuns:
		return true
	}
	return false
}

// Branch is the deterministic delivery branch of a job (DECISIONS 12).
func Branch(jobID string) string { return "forge/job-" + jobID }

// State is one delivery as persisted. Everything but ETag, PhaseAttempts
// and the times is what the owner may see.
type State struct {
	JobID        string
	Repo         Repo
	BaseBranch   string
	CandidateSHA string
	Branch       string
	// PushOver is the commit Branch must be at for the push: a follow-up
	// job's base, the pull request's previous head (DECISIONS 18); its
	// candidate is one more commit on the branch, a fast-forward. "": the
	// branch must not exist yet.
	PushOver string

	Phase         Phase
	PhaseAttempts int       // transient failures of the current phase
	NextAt        time.Time // the phase runs again no earlier
	StartedAt     time.Time // delivery start (the timeout counts from here)
	CIStartedAt   time.Time // entry into the ci phase (no_runs_grace)

	PRNumber int
	PRURL    string
	CIState  string
	ETag     string // of the last runs answer
	MergeSHA string
	Code     string // failure code when Phase is failed

	// Kept in memory only (a restarted Gate recomputes them):
	// Workflows is whether the candidate changes .github/workflows
	// (workflowsUnknown until asked); RunsKey and RunsVerdict are the ids
	// and states of the last runs answer and its verdict, for the two
	// consecutive equal polls a success needs (DECISIONS 12).
	// PRETag is the ETag of the ci phase's last pull request read.
	// PollReserved: the next runs poll has its slot in the budget's
	// queue (reservePoll, claimPoll).
	Workflows    int8
	RunsKey      string
	RunsVerdict  string
	PRETag       string
	PollReserved bool
	// Usage is the job's model gateway usage as the store read it with
	// the state (nil: not metered); the pull request's body reports it.
	Usage *Usage
	// Review is the repository's merge policy "review" (DECISIONS 18):
	// after CI the delivery waits in the review phase for an approval of
	// the candidate by an authorised person who is not one of
	// Requesters. The Gate sets both each time it reads the state (the
	// policy from its configuration, the requesters from the store: the
	// actors of the triggers of the pull request's jobs).
	Review     bool
	Requesters []string
	// ReviewsETag is the ETag of the review phase's last reviews read
	// (memory only).
	ReviewsETag string
}

// Usage is a job's model gateway usage, summed over its attempts
// (docs/api.md).
type Usage struct {
	Requests, InputTokens, OutputTokens, CachedTokens int64
}

// State.Workflows values.
const (
	workflowsUnknown int8 = iota
	workflowsNo
	workflowsYes
)

// New is the initial state of a delivery started at now.
func New(jobID string, repo Repo, baseBranch, candidate string, now time.Time) State {
	return State{JobID: jobID, Repo: repo, BaseBranch: baseBranch, CandidateSHA: candidate,
		Branch: Branch(jobID), Phase: PhasePush, NextAt: now, StartedAt: now}
}

// Config is the timing of deliveries (gate.json delivery).
type Config struct {
	MaxAttempts  int
	RetryBase    time.Duration
	PollInterval time.Duration
	NoRunsGrace  time.Duration
	Timeout      time.Duration
}

// Validate checks c.
func (c Config) Validate() error {
	if c.MaxAttempts < 1 || c.RetryBase <= 0 || c.PollInterval <= 0 || c.NoRunsGrace <= 0 || c.Timeout <= 0 {
		return errors.New("delivery: incomplete config")
	}
	return nil
}

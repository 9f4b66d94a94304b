package evidence

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Limits.
const (
	MaxRecords     = ident.MaxEvidenceRecords    // per batch and per attempt
	MaxBatchBytes  = ident.MaxEvidenceBatchBytes // canonical bytes per batch
	MaxOutputBytes = 64 << 10                    // stored output bytes per attempt
	MaxBatches     = ident.MaxEvidenceBatches    // 1 = work, 2 = cleanup
	MaxChecks      = 32                          // scoped checks per task
	MaxArgs        = 64                          // argv elements per check
	MaxDurationMS  = 7 * 24 * 3600 * 1000
)

// Redacted is the only non-empty value output and args elements may hold.
const Redacted = ident.EvidenceRedacted

// Phase is where in the pipeline a record was made.
type Phase string

// Phases, in pipeline order.
const (
	PhasePreparation         Phase = "preparation"
	PhasePlugin              Phase = "plugin"
	PhaseWorkspaceValidation Phase = "workspace_validation"
	PhaseScopedCheck         Phase = "scoped_check"
	PhaseCandidateCommit     Phase = "candidate_commit"
	PhaseCleanup             Phase = "cleanup"
	// PhaseNetwork sums up the connections the attempt's sandboxes and
	// proxy refused; it ends batch 1, whatever came before.
	PhaseNetwork Phase = "network"
)

// Reason says what happened in a phase.
type Reason string

// Preparation reasons.
const (
	ReasonNoRepositoryRoots      Reason = "no_repository_roots"
	ReasonUnknownRepository      Reason = "unknown_repository"
	ReasonRepositoryPathDrift    Reason = "repository_path_drift"
	ReasonDefaultBranchMismatch  Reason = "default_branch_mismatch"
	ReasonBaseMissing            Reason = "base_missing"
	ReasonBaseNotOnDefaultBranch Reason = "base_not_on_default_branch"
	ReasonInvalidTask            Reason = "invalid_task"
	ReasonInvalidPolicy          Reason = "invalid_policy"
	ReasonPolicyRejected         Reason = "policy_rejected"
	ReasonPluginRejected         Reason = "plugin_rejected"
	ReasonWorktreeFailed         Reason = "worktree_failed"
	ReasonGitFailed              Reason = "git_failed" // also workspace_validation
)

// Plugin reasons.
const (
	ReasonPluginFailed      Reason = "failed"
	ReasonTimedOut          Reason = "timed_out" // also scoped_check
	ReasonOutputLimit       Reason = "output_limit"
	ReasonProtocolViolation Reason = "protocol_violation"
	ReasonSpawnFailed       Reason = "spawn_failed" // also scoped_check
	ReasonCancelled         Reason = "cancelled"
	ReasonSurvivors         Reason = "processes_survived" // also scoped_check: the cgroup's kill did not empty it
)

// Workspace validation reasons.
const (
	ReasonHeadMoved     Reason = "head_moved"
	ReasonRefsChanged   Reason = "refs_changed"
	ReasonConfigChanged Reason = "config_changed"
	ReasonGitDirChanged Reason = "git_dir_changed"
	ReasonPathEscape    Reason = "path_escape"
	ReasonEmptyChange   Reason = "empty_change"
	// ReasonSecretInCandidate: a secret the Worker holds (or an encoding
	// of it) is in the change, the commit subject, the agent report or
	// the evidence; the record may name the file (Path).
	ReasonSecretInCandidate Reason = "secret_in_candidate"
)

// Scoped check reasons.
const (
	ReasonPassed    Reason = "passed"
	ReasonFailed    Reason = "failed"
	ReasonSignalled Reason = "signalled"
)

// Candidate commit and cleanup reasons.
const (
	ReasonCreated       Reason = "created"
	ReasonCommitFailed  Reason = "commit_failed"
	ReasonRefFailed     Reason = "ref_failed"
	ReasonCleanupFailed Reason = "cleanup_failed"
	// ReasonRefused: the network record's one reason.
	ReasonRefused Reason = "refused"
)

// reasonsOf returns the closed reason set of a phase (nil: unknown phase).
func reasonsOf(p Phase) []Reason {
	switch p {
	case PhasePreparation:
		return []Reason{ReasonNoRepositoryRoots, ReasonUnknownRepository, ReasonRepositoryPathDrift,
			ReasonDefaultBranchMismatch, ReasonBaseMissing, ReasonBaseNotOnDefaultBranch, ReasonInvalidTask,
			ReasonInvalidPolicy, ReasonPolicyRejected, ReasonPluginRejected, ReasonWorktreeFailed, ReasonGitFailed}
	case PhasePlugin:
		return []Reason{ReasonPluginFailed, ReasonTimedOut, ReasonOutputLimit, ReasonProtocolViolation,
			ReasonSpawnFailed, ReasonCancelled, ReasonSurvivors}
	case PhaseWorkspaceValidation:
		return []Reason{ReasonHeadMoved, ReasonRefsChanged, ReasonConfigChanged, ReasonGitDirChanged,
			ReasonPathEscape, ReasonEmptyChange, ReasonSecretInCandidate, ReasonGitFailed}
	case PhaseScopedCheck:
		return []Reason{ReasonPassed, ReasonFailed, ReasonSignalled, ReasonTimedOut, ReasonSpawnFailed, ReasonSurvivors, ReasonPathEscape}
	case PhaseCandidateCommit:
		return []Reason{ReasonCreated, ReasonCommitFailed, ReasonRefFailed}
	case PhaseCleanup:
		return []Reason{ReasonCleanupFailed}
	case PhaseNetwork:
		return []Reason{ReasonRefused}
	}
	return nil
}

// order is a phase's position in the pipeline (0: unknown).
func order(p Phase) int {
	switch p {
	case PhasePreparation:
		return 1
	case PhasePlugin:
		return 2
	case PhaseWorkspaceValidation:
		return 3
	case PhaseScopedCheck:
		return 4
	case PhaseCandidateCommit:
		return 5
	case PhaseNetwork:
		return 6
	case PhaseCleanup:
		return 7
	}
	return 0
}

// Record is one evidence record. Optional fields are pointers so that a
// present zero value and an absent field differ; see the package doc for
// which fields each phase carries.
type Record struct {
	Phase           Phase    `json:"phase"`
	Reason          Reason   `json:"reason"`
	Index           *int     `json:"index,omitempty"`
	SHA             string   `json:"sha,omitempty"`
	Path            string   `json:"path,omitempty"`
	ExitCode        *int     `json:"exit_code,omitempty"`
	DurationMS      *int64   `json:"duration_ms,omitempty"`
	ArgCount        *int     `json:"arg_count,omitempty"`
	Args            []string `json:"args,omitempty"`
	Output          *string  `json:"output,omitempty"`
	OutputRedacted  *bool    `json:"output_redacted,omitempty"`
	OutputTruncated *bool    `json:"output_truncated,omitempty"`
	// RefusedCount and Refused are a network record's: how many
	// connections were refused, and the first destinations.
	RefusedCount *int64        `json:"refused_count,omitempty"`
	Refused      []Destination `json:"refused,omitempty"`
}

// Destination is one refused destination of a network record: the host
// (an IP address, or the name a CONNECT asked for), the port, and how
// often.
type Destination struct {
	Host  string `json:"host"`
	Port  int    `json:"port"`
	Count int64  `json:"count"`
}

// Bounds of a network record.
const (
	MaxDestinations = 32
	MaxRefusedCount = 1 << 40
	MaxHostBytes    = 253
)

// ValidHost reports whether h may be a network record's host: an IP
// address in its canonical text, or a lower-case DNS name of letters,
// digits, dots and hyphens (at most MaxHostBytes).
func ValidHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" && a.String() == h
	}
	if h == "" || len(h) > MaxHostBytes || h[0] == '.' || h[len(h)-1] == '.' || strings.Contains(h, "..") {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Network returns the network/refused record of count refusals, the
// destinations kept (at most MaxDestinations, each valid; the others are
// left out), or false when there is nothing to record.
func Network(count int64, dests []Destination) (Record, bool) {
	var kept []Destination
	for _, d := range dests {
		if len(kept) < MaxDestinations && ValidHost(d.Host) && d.Port >= 1 && d.Port <= 65535 && d.Count >= 1 {
			kept = append(kept, d)
		}
	}
	if count < 1 || len(kept) == 0 {
		return Record{}, false
	}
	return Record{Phase: PhaseNetwork, Reason: ReasonRefused, RefusedCount: ptr(min(count, MaxRefusedCount)), Refused: kept}, true
}

// Error is a validation failure. It names a field and a fixed reason,
// never a value.
type Error struct {
	Record int // index of the record in its batch, or -1 for the batch
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Record < 0 {
		return "evidence: " + e.Field + ": " + e.Reason
	}
	return "evidence: record " + strconv.Itoa(e.Record) + ": " + e.Field + ": " + e.Reason
}

func recErr(i int, field, reason string) error {
	return &Error{Record: i, Field: field, Reason: reason}
}

// Failure returns a record of a failed phase (any phase but scoped_check).
func Failure(p Phase, r Reason) Record { return Record{Phase: p, Reason: r} }

// SecretInCandidate returns the workspace_validation/secret_in_candidate
// record naming the file that holds the secret: path is kept only when
// ValidPath accepts it ("" when the secret is not in a file's content).
func SecretInCandidate(path string) Record {
	r := Failure(PhaseWorkspaceValidation, ReasonSecretInCandidate)
	if ValidPath(path) {
		r.Path = path
	}
	return r
}

// MaxPathBytes bounds the path of a secret_in_candidate record.
const MaxPathBytes = 512

// ValidPath reports whether p may be the path of a secret_in_candidate
// record: 1 to MaxPathBytes bytes of printable ASCII, relative, without
// empty, "." or ".." components. Anything else (a name no viewer or
// terminal may be handed as is) is left out of the record.
func ValidPath(p string) bool {
	if p == "" || len(p) > MaxPathBytes || p[0] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] > 0x7e || p[i] == '\\' {
			return false
		}
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// Candidate returns the candidate_commit/created record for sha.
func Candidate(sha string) Record {
	return Record{Phase: PhaseCandidateCommit, Reason: ReasonCreated, SHA: sha}
}

// Check describes one scoped check run, before redaction.
type Check struct {
	Index       int
	SHA         string // the commit the check is bound to
	Reason      Reason // passed, failed, signalled, timed_out, spawn_failed
	ExitCode    int    // meaningful for passed and failed
	DurationMS  int64
	ArgCount    int
	OutputBytes int64 // bytes the check wrote (stdout and stderr)
	Truncated   bool  // OutputBytes exceeded the capture bound
}

// CheckRecord redacts c into its record: one placeholder per argument, and
// output reduced to whether there was any.
func CheckRecord(c Check) Record {
	args := make([]string, c.ArgCount)
	for i := range args {
		args[i] = Redacted
	}
	out := ""
	if c.OutputBytes > 0 {
		out = Redacted
	}
	redacted, truncated := out != "", c.Truncated && out != ""
	r := Record{
		Phase: PhaseScopedCheck, Reason: c.Reason, Index: ptr(c.Index), SHA: c.SHA,
		DurationMS: ptr(max(c.DurationMS, 0)), ArgCount: ptr(c.ArgCount), Args: args,
		Output: &out, OutputRedacted: &redacted, OutputTruncated: &truncated,
	}
	if c.Reason == ReasonPassed || c.Reason == ReasonFailed {
		r.ExitCode = ptr(c.ExitCode)
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// Encode validates r alone and returns its canonical JSON.
func (r Record) Encode() (json.RawMessage, error) {
	if err := r.validate(0); err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// EncodeAll encodes records in order.
func EncodeAll(rs []Record) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(rs))
	for _, r := range rs {
		b, err := r.Encode()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

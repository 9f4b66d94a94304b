package evidence

import (
	"encoding/json"
	"slices"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// validate checks one record on its own; i is its index for errors.
func (r Record) validate(i int) error {
	reasons := reasonsOf(r.Phase)
	if reasons == nil {
		return recErr(i, "phase", "unknown phase")
	}
	if !slices.Contains(reasons, r.Reason) {
		return recErr(i, "reason", "not a reason of this phase")
	}
	if r.Phase == PhaseNetwork {
		return r.validateNetwork(i)
	}
	if r.RefusedCount != nil || r.Refused != nil {
		return recErr(i, "refused", "only in a network record")
	}
	if r.Phase == PhaseScopedCheck {
		return r.validateCheck(i)
	}
	if r.Index != nil || r.ExitCode != nil || r.DurationMS != nil || r.ArgCount != nil || r.Args != nil ||
		r.Output != nil || r.OutputRedacted != nil || r.OutputTruncated != nil {
		return recErr(i, "phase", "check fields outside a scoped_check record")
	}
	if r.Path != "" && (r.Reason != ReasonSecretInCandidate || !ValidPath(r.Path)) {
		return recErr(i, "path", "only a valid path of a secret_in_candidate record")
	}
	if r.Phase == PhaseCandidateCommit && r.Reason == ReasonCreated {
		if !ident.ValidSHA(r.SHA) {
			return recErr(i, "sha", "must be 40 lowercase hex digits")
		}
	} else if r.SHA != "" {
		return recErr(i, "sha", "not allowed for this reason")
	}
	return nil
}

// validateNetwork checks a network/refused record: a count and the
// destinations kept, each a valid host and port counted at least once,
// none twice, their counts within the total; no other field.
func (r Record) validateNetwork(i int) error {
	if r.Index != nil || r.SHA != "" || r.Path != "" || r.ExitCode != nil || r.DurationMS != nil || r.ArgCount != nil ||
		r.Args != nil || r.Output != nil || r.OutputRedacted != nil || r.OutputTruncated != nil {
		return recErr(i, "phase", "only refused fields in a network record")
	}
	if r.RefusedCount == nil || *r.RefusedCount < 1 || *r.RefusedCount > MaxRefusedCount {
		return recErr(i, "refused_count", "required, 1 and bounded")
	}
	if len(r.Refused) < 1 || len(r.Refused) > MaxDestinations {
		return recErr(i, "refused", "1 to 32 destinations")
	}
	var sum int64
	seen := map[Destination]bool{}
	for _, d := range r.Refused {
		if !ValidHost(d.Host) || d.Port < 1 || d.Port > 65535 || d.Count < 1 || d.Count > *r.RefusedCount {
			return recErr(i, "refused", "a destination is a host, a port and a count")
		}
		key := Destination{Host: d.Host, Port: d.Port}
		if seen[key] {
			return recErr(i, "refused", "a destination is listed once")
		}
		seen[key] = true
		sum += d.Count
	}
	if sum > *r.RefusedCount {
		return recErr(i, "refused", "more refusals listed than counted")
	}
	return nil
}

func (r Record) validateCheck(i int) error {
	switch {
	case r.Index == nil || *r.Index < 0 || *r.Index >= MaxChecks:
		return recErr(i, "index", "required, 0 to 31")
	case !ident.ValidSHA(r.SHA):
		return recErr(i, "sha", "must be 40 lowercase hex digits")
	case r.Path != "":
		return recErr(i, "path", "not allowed in a scoped_check record")
	case r.DurationMS == nil || *r.DurationMS < 0 || *r.DurationMS > MaxDurationMS:
		return recErr(i, "duration_ms", "required, non-negative and bounded")
	case r.ArgCount == nil || *r.ArgCount < 1 || *r.ArgCount > MaxArgs:
		return recErr(i, "arg_count", "required, 1 to 64")
	case len(r.Args) != *r.ArgCount:
		return recErr(i, "args", "must hold arg_count placeholders")
	case r.Output == nil || r.OutputRedacted == nil || r.OutputTruncated == nil:
		return recErr(i, "output", "output, output_redacted and output_truncated are required")
	case *r.Output != "" && *r.Output != Redacted:
		return recErr(i, "output", "must be empty or the redaction marker")
	case *r.OutputRedacted != (*r.Output == Redacted):
		return recErr(i, "output_redacted", "must say whether output was redacted")
	case *r.OutputTruncated && !*r.OutputRedacted:
		return recErr(i, "output_truncated", "truncation implies redacted output")
	}
	for _, a := range r.Args {
		if a != Redacted {
			return recErr(i, "args", "every argument must be the redaction marker")
		}
	}
	switch r.Reason {
	case ReasonPassed:
		if r.ExitCode == nil || *r.ExitCode != 0 {
			return recErr(i, "exit_code", "a passed check exits 0")
		}
	case ReasonFailed:
		if r.ExitCode == nil || *r.ExitCode < 1 || *r.ExitCode > 255 {
			return recErr(i, "exit_code", "a failed check exits 1 to 255")
		}
	default:
		if r.ExitCode != nil {
			return recErr(i, "exit_code", "only when the check exited by itself")
		}
	}
	return nil
}

// Options adds what the validator may know about the attempt's task.
type Options struct {
	// ArgCounts, when non-nil, is the argv length of each of the task's
	// checks: a check's index must be below len(ArgCounts) and its
	// arg_count must match.
	ArgCounts []int
	// BaseSHA, when set, is the attempt's base: checks in a batch without
	// a created candidate must name it.
	BaseSHA string
}

// Batch is a validated batch.
type Batch struct {
	Records     []json.RawMessage // canonical encodings, in order
	Bytes       int               // sum of canonical record sizes
	OutputBytes int               // sum of output field lengths
}

// ValidateBatch strictly decodes and validates batch number n and returns
// the canonical records to store. On error it returns a zero Batch.
func ValidateBatch(n int, raw []json.RawMessage, opt Options) (Batch, error) {
	if n < 1 || n > MaxBatches {
		return Batch{}, recErr(-1, "batch", "must be 1 or 2")
	}
	if len(raw) == 0 || len(raw) > MaxRecords {
		return Batch{}, recErr(-1, "records", "must hold 1 to 35 records")
	}
	recs := make([]Record, len(raw))
	total := 0
	for i, b := range raw {
		total += len(b)
		if total > MaxBatchBytes {
			return Batch{}, recErr(-1, "records", "batch too large")
		}
		if err := strictjson.Decode(b, &recs[i]); err != nil {
			return Batch{}, recErr(i, "record", "not a valid record object")
		}
		if err := recs[i].validate(i); err != nil {
			return Batch{}, err
		}
	}
	var err error
	if n == 1 {
		err = workBatch(recs, opt)
	} else if len(recs) != 1 || recs[0].Phase != PhaseCleanup {
		err = recErr(-1, "records", "batch 2 is exactly one cleanup record")
	}
	if err != nil {
		return Batch{}, err
	}
	out := Batch{Records: make([]json.RawMessage, len(recs))}
	for i, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return Batch{}, recErr(i, "record", "cannot encode")
		}
		out.Records[i] = b
		out.Bytes += len(b)
		if r.Output != nil {
			out.OutputBytes += len(*r.Output)
		}
	}
	if out.Bytes > MaxBatchBytes {
		return Batch{}, recErr(-1, "records", "batch too large")
	}
	return out, nil
}

// workBatch checks the cross-record rules of batch 1.
func workBatch(recs []Record, opt Options) error {
	last := 0
	seen := map[Phase]bool{}
	checks, stopped := 0, false
	checkSHA, candidate := "", ""
	for i, r := range recs {
		o := order(r.Phase)
		if r.Phase == PhaseCleanup {
			return recErr(i, "phase", "cleanup records belong in batch 2")
		}
		if r.Phase == PhaseNetwork {
			if i != len(recs)-1 {
				return recErr(i, "phase", "the network record comes last")
			}
			continue
		}
		if stopped {
			return recErr(i, "phase", "nothing follows a check that did not pass")
		}
		if o < last {
			return recErr(i, "phase", "out of pipeline order")
		}
		last = o
		if r.Phase != PhaseScopedCheck {
			if seen[r.Phase] {
				return recErr(i, "phase", "at most one record per phase")
			}
			seen[r.Phase] = true
			if r.Phase == PhaseCandidateCommit && r.Reason == ReasonCreated {
				candidate = r.SHA
			}
			continue
		}
		if *r.Index != checks {
			return recErr(i, "index", "checks run in task order from 0")
		}
		if opt.ArgCounts != nil && (*r.Index >= len(opt.ArgCounts) || opt.ArgCounts[*r.Index] != *r.ArgCount) {
			return recErr(i, "index", "does not match the task's checks")
		}
		if checks > 0 && r.SHA != checkSHA {
			return recErr(i, "sha", "every check names the same commit")
		}
		checkSHA = r.SHA
		checks++
		stopped = r.Reason != ReasonPassed
	}
	// A non-created candidate_commit or a failure in an earlier phase ends
	// the pipeline: nothing may follow a failure.
	// (The network record, which sums up the whole attempt, may follow.)
	work := recs
	if n := len(recs); n > 0 && recs[n-1].Phase == PhaseNetwork {
		work = recs[:n-1]
	}
	for i, r := range work {
		failed := r.Phase != PhaseScopedCheck && !(r.Phase == PhaseCandidateCommit && r.Reason == ReasonCreated)
		if failed && i != len(work)-1 {
			return recErr(i, "phase", "a failed phase ends the batch")
		}
	}
	if candidate != "" {
		if candidate == opt.BaseSHA {
			return recErr(-1, "records", "the candidate is a new commit, not the base")
		}
		if stopped {
			return recErr(-1, "records", "no candidate after a failed check")
		}
		if checks > 0 && checkSHA != candidate {
			return recErr(-1, "records", "checks before a candidate name the candidate")
		}
		if opt.ArgCounts != nil && checks != len(opt.ArgCounts) {
			return recErr(-1, "records", "a candidate needs every check to have passed")
		}
	} else if checks > 0 && opt.BaseSHA != "" && checkSHA != opt.BaseSHA {
		return recErr(-1, "records", "checks without a candidate name the base")
	}
	return nil
}

// CreatedCandidate returns the SHA of the candidate_commit record with reason
// created among an attempt's stored (validated) records, or "" when there
// is none or a record does not decode.
func CreatedCandidate(records []json.RawMessage) string {
	for _, b := range records {
		var r Record
		if err := strictjson.Decode(b, &r); err != nil {
			return ""
		}
		if r.Phase == PhaseCandidateCommit && r.Reason == ReasonCreated {
			return r.SHA
		}
	}
	return ""
}

// CheckAttempt checks that adding b to an attempt that already holds
// records records and outputBytes bytes of output stays within the
// per-attempt limits.
func CheckAttempt(records, outputBytes int, b Batch) error {
	if records+len(b.Records) > MaxRecords {
		return recErr(-1, "records", "too many records for the attempt")
	}
	if outputBytes+b.OutputBytes > MaxOutputBytes {
		return recErr(-1, "output", "too much output for the attempt")
	}
	return nil
}

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Delivery phases as stored (pkg/delivery owns their meaning).
const (
	DeliveryPush        = "push"
	DeliveryPullRequest = "pull_request"
	DeliveryCI          = "ci"
	DeliveryReview      = "review"
	DeliveryMerge       = "merge"
	DeliveryMerged      = "merged"
	DeliveryFailed      = "failed"
)

// Bounds of stored delivery strings.
const (
	maxPRURLBytes = 512
	maxETagBytes  = 256
)

// DeliveryView is what the owner sees of a delivery: nothing else (no
// token, key, credentials or GitHub text is ever stored).
type DeliveryView struct {
	Phase       string `json:"phase"`
	Branch      string `json:"branch"`
	PRURL       string `json:"pr_url,omitempty"`
	CIState     string `json:"ci_state,omitempty"`
	MergeSHA    string `json:"merge_sha,omitempty"`
	FailureCode string `json:"failure_code,omitempty"`
}

// Delivery is one delivery's full persisted state.
type Delivery struct {
	JobID        string
	Target       DeliveryTarget
	CandidateSHA string
	Branch       string
	// PushOver is the commit the branch must be at for the push (a
	// follow-up's base, the pull request's previous head); "": the
	// branch must not exist.
	PushOver string

	Phase         string
	PhaseAttempts int
	NextAt        time.Time
	StartedAt     time.Time
	CIStartedAt   time.Time // zero: not in ci yet

	PRNumber    int
	PRURL       string
	CIState     string
	ETag        string
	MergeSHA    string
	FailureCode string

	// Usage is the job's model gateway usage when the delivery was read
	// (nil: not metered); SaveDelivery ignores it.
	Usage *Usage
	// Requesters are the logins whose triggers started a job of the
	// delivery's pull request (this job and, once the pull request
	// exists, every other job of it), when the delivery was read;
	// SaveDelivery ignores them.
	Requesters []string
}

func validPhase(p string) bool {
	switch p {
	case DeliveryPush, DeliveryPullRequest, DeliveryCI, DeliveryReview, DeliveryMerge, DeliveryMerged, DeliveryFailed:
		return true
	}
	return false
}

func terminalPhase(p string) bool { return p == DeliveryMerged || p == DeliveryFailed }

func printable(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func validDelivery(d Delivery) error {
	switch {
	case !ident.ValidRef(d.JobID), !ident.ValidSHA(d.CandidateSHA), !ident.ValidBranch(d.Branch),
		d.PushOver != "" && !ident.ValidSHA(d.PushOver):
		return invalid("malformed delivery identity")
	case !validPhase(d.Phase), d.PhaseAttempts < 0, d.PRNumber < 0:
		return invalid("malformed delivery phase")
	case (d.Phase == DeliveryFailed) != (d.FailureCode != ""), d.FailureCode != "" && !ident.ValidCode(d.FailureCode):
		return invalid("malformed delivery failure code")
	case d.MergeSHA != "" && !ident.ValidSHA(d.MergeSHA), d.Phase == DeliveryMerged && d.MergeSHA == "":
		return invalid("malformed merge sha")
	case d.PRURL != "" && (!strings.HasPrefix(d.PRURL, "https://github.com/") || strings.ContainsAny(d.PRURL, "@?#") ||
		!printable(d.PRURL, maxPRURLBytes)):
		return invalid("malformed pull request url")
	case d.CIState != "" && !ident.ValidCode(d.CIState), !printable(d.ETag, maxETagBytes):
		return invalid("malformed ci state")
	}
	return nil
}

func validTarget(t *DeliveryTarget) bool {
	return t == nil || (ident.ValidGitHubOwner(t.Owner) && ident.ValidGitHubRepo(t.Repo) && ident.ValidBranch(t.BaseBranch))
}

// succeedCoding records the success of a coding attempt on job seq: the
// job ends succeeded, or when it has a delivery target it becomes
// delivering with a new delivery in the push phase: to its own branch,
// or for a follow-up to its pull request's branch, over its base.
func (t *wtx) succeedCoding(seq, events int64, ordinal int, jobID, candidate string, us int64) (string, error) {
	var repo, branch, over sql.NullString
	if err := t.queryRow(`SELECT j.delivery_repo, f.branch, CASE WHEN f.branch IS NULL THEN NULL ELSE j.base_sha END
FROM jobs j LEFT JOIN followups f ON f.job_seq = j.seq WHERE j.seq = ?`, seq).Scan(&repo, &branch, &over); err != nil {
		return "", err
	}
	if !branch.Valid {
		branch.String = "forge/job-" + jobID
	}
	if !repo.Valid {
		return JobSucceeded, t.finishSucceeded(seq, events, ordinal, nil, candidate, us)
	}
	if _, err := t.exec(`UPDATE jobs SET status = 'delivering', current_attempt = NULL, candidate_sha = ?,
  event_count = ?, updated_at = ? WHERE seq = ?`, candidate, events+1, us, seq); err != nil {
		return "", err
	}
	if _, err := t.exec(`INSERT INTO deliveries (job_seq, candidate_sha, branch, push_over, phase, next_at, started_at, updated_at)
VALUES (?, ?, ?, ?, 'push', ?, ?, ?)`, seq, candidate, branch.String, over, us, us, us); err != nil {
		return "", err
	}
	t.events(seq, events+1, us, ev{typ: EventDelivering, attempt: ordinal})
	return JobDelivering, nil
}

// finishSucceeded ends a job succeeded after its attempt succeeded.
func (t *wtx) finishSucceeded(seq, events int64, ordinal int, result any, candidate string, us int64) error {
	if _, err := t.exec(`UPDATE jobs SET status = 'succeeded', current_attempt = NULL, result = ?, candidate_sha = ?,
  event_count = ?, updated_at = ? WHERE seq = ?`, result, nullable(candidate), events+1, us, seq); err != nil {
		return err
	}
	t.events(seq, events+1, us, ev{typ: EventSucceeded, attempt: ordinal})
	return nil
}

const deliveryColumns = `j.id, j.delivery_owner, j.delivery_repo, j.delivery_base, d.candidate_sha, d.branch, d.phase,
  d.phase_attempts, d.next_at, d.started_at, d.ci_started_at, d.pr_number, d.pr_url, d.ci_state, d.etag, d.merge_sha,
  d.failure_code, d.push_over, d.job_seq`

func scanDelivery(sc scanner) (Delivery, int64, error) {
	var (
		d                             Delivery
		next, started                 int64
		ciStarted, pr                 sql.NullInt64
		url, ci, etag, mergeSHA, code sql.NullString
		over                          sql.NullString
		seq                           int64
	)
	if err := sc.Scan(&d.JobID, &d.Target.Owner, &d.Target.Repo, &d.Target.BaseBranch, &d.CandidateSHA, &d.Branch,
		&d.Phase, &d.PhaseAttempts, &next, &started, &ciStarted, &pr, &url, &ci, &etag, &mergeSHA, &code, &over, &seq); err != nil {
		return Delivery{}, 0, err
	}
	d.NextAt, d.StartedAt = time.UnixMicro(next).UTC(), time.UnixMicro(started).UTC()
	if ciStarted.Valid {
		d.CIStartedAt = time.UnixMicro(ciStarted.Int64).UTC()
	}
	d.PRNumber = int(pr.Int64)
	d.PRURL, d.CIState, d.ETag, d.MergeSHA, d.FailureCode = url.String, ci.String, etag.String, mergeSHA.String, code.String
	d.PushOver = over.String
	return d, seq, nil
}

// ActiveDeliveries returns every delivery not yet merged or failed, oldest
// first.
func (s *Store) ActiveDeliveries(ctx context.Context) ([]Delivery, error) {
	var out []Delivery
	err := s.read(ctx, func(q querier) error {
		out = nil
		rows, err := q.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries d JOIN jobs j ON j.seq = d.job_seq
WHERE d.phase <> 'merged' AND d.phase <> 'failed' ORDER BY d.job_seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var seqs []int64
		for rows.Next() {
			d, seq, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out, seqs = append(out, d), append(seqs, seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		for i := range out {
			if out[i].Usage, err = readJobUsage(ctx, q, seqs[i]); err != nil {
				return err
			}
			if out[i].Requesters, err = readRequesters(ctx, q, seqs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// Delivery returns the delivery of job id, or ErrNotFound.
func (s *Store) Delivery(ctx context.Context, id string) (Delivery, error) {
	if !ident.ValidRef(id) {
		return Delivery{}, ErrNotFound
	}
	var d Delivery
	err := s.read(ctx, func(q querier) (err error) {
		var seq int64
		d, seq, err = scanDelivery(q.QueryRowContext(ctx, `SELECT `+deliveryColumns+`
FROM deliveries d JOIN jobs j ON j.seq = d.job_seq WHERE j.id = ?`, id))
		if isNoRows(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if d.Usage, err = readJobUsage(ctx, q, seq); err != nil {
			return err
		}
		d.Requesters, err = readRequesters(ctx, q, seq)
		return err
	})
	return d, err
}

func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// SaveDelivery commits next as the delivery of next.JobID, whose stored
// phase must still be prev.Phase (else ErrStale: another writer moved it)
// and whose job is delivering. Entering a new phase records a "delivery"
// event with the phase as code; a terminal phase also ends the job:
// succeeded (merged) or failed with next.FailureCode, with its event.
func (s *Store) SaveDelivery(ctx context.Context, prev, next Delivery, now time.Time) error {
	if err := validDelivery(next); err != nil {
		return err
	}
	if prev.JobID != next.JobID || prev.CandidateSHA != next.CandidateSHA || prev.Branch != next.Branch ||
		prev.PushOver != next.PushOver || terminalPhase(prev.Phase) {
		return invalid("delivery transition changes its identity or leaves a terminal phase")
	}
	us := now.UnixMicro()
	return s.w.do(ctx, func(t *wtx) error {
		var (
			seq, events int64
			status      string
			phase       string
		)
		err := t.queryRow(`SELECT j.seq, j.event_count, j.status, d.phase FROM jobs j JOIN deliveries d ON d.job_seq = j.seq
WHERE j.id = ?`, next.JobID).Scan(&seq, &events, &status, &phase)
		if isNoRows(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if status != JobDelivering || phase != prev.Phase {
			return ErrStale
		}
		if _, err := t.exec(`UPDATE deliveries SET phase = ?, phase_attempts = ?, next_at = ?, started_at = ?, ci_started_at = ?,
  pr_number = ?, pr_url = ?, ci_state = ?, etag = ?, merge_sha = ?, failure_code = ?, updated_at = ?
WHERE job_seq = ? AND candidate_sha = ? AND branch = ?`,
			next.Phase, next.PhaseAttempts, next.NextAt.UnixMicro(), next.StartedAt.UnixMicro(), micros(next.CIStartedAt),
			nullInt(next.PRNumber), nullable(next.PRURL), nullable(next.CIState), nullable(next.ETag),
			nullable(next.MergeSHA), nullable(next.FailureCode), us, seq, next.CandidateSHA, next.Branch); err != nil {
			return err
		}
		if next.Phase == prev.Phase {
			return nil
		}
		switch next.Phase {
		case DeliveryMerged:
			if _, err := t.exec(`UPDATE jobs SET status = 'succeeded', event_count = ?, updated_at = ? WHERE seq = ?`,
				events+1, us, seq); err != nil {
				return err
			}
			t.events(seq, events+1, us, ev{typ: EventSucceeded})
		case DeliveryFailed:
			if _, err := t.exec(`UPDATE jobs SET status = 'failed', failure_code = ?, event_count = ?, updated_at = ? WHERE seq = ?`,
				next.FailureCode, events+1, us, seq); err != nil {
				return err
			}
			t.events(seq, events+1, us, ev{typ: EventFailed, code: next.FailureCode})
		default:
			if _, err := t.exec(`UPDATE jobs SET event_count = ?, updated_at = ? WHERE seq = ?`, events+1, us, seq); err != nil {
				return err
			}
			t.events(seq, events+1, us, ev{typ: EventDelivery, code: next.Phase})
		}
		return nil
	})
}

func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// deliveryViewColumn renders a job's delivery as one JSON object column
// (NULL without one), for jobColumns.
const deliveryViewColumn = `(SELECT json_object('phase', d.phase, 'branch', d.branch, 'pr_url', d.pr_url,
  'ci_state', d.ci_state, 'merge_sha', d.merge_sha, 'failure_code', d.failure_code)
  FROM deliveries d WHERE d.job_seq = jobs.seq)`

func decodeDeliveryView(s sql.NullString) (*DeliveryView, error) {
	if !s.Valid {
		return nil, nil
	}
	var v struct {
		Phase       string  `json:"phase"`
		Branch      string  `json:"branch"`
		PRURL       *string `json:"pr_url"`
		CIState     *string `json:"ci_state"`
		MergeSHA    *string `json:"merge_sha"`
		FailureCode *string `json:"failure_code"`
	}
	if err := json.Unmarshal([]byte(s.String), &v); err != nil {
		return nil, err
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return &DeliveryView{Phase: v.Phase, Branch: v.Branch, PRURL: str(v.PRURL), CIState: str(v.CIState),
		MergeSHA: str(v.MergeSHA), FailureCode: str(v.FailureCode)}, nil
}

// requestersSQL selects, for the job ?1, the actors of the triggers of
// every job of its pull request: its own, and those of the jobs whose
// delivery reached the same pull request number or that follow it up.
const requestersSQL = `WITH pr(repo, number) AS (
  SELECT j.repository_id, coalesce(f.number, d.pr_number) FROM jobs j
  LEFT JOIN followups f ON f.job_seq = j.seq LEFT JOIN deliveries d ON d.job_seq = j.seq WHERE j.seq = ?1),
chain(seq) AS (
  SELECT ?1
  UNION SELECT d.job_seq FROM deliveries d JOIN jobs j ON j.seq = d.job_seq JOIN pr ON d.pr_number = pr.number AND j.repository_id = pr.repo
  UNION SELECT f.job_seq FROM followups f JOIN pr ON f.number = pr.number AND f.repository_id = pr.repo)
SELECT DISTINCT t.actor FROM intake_triggers t JOIN chain ON t.job_seq = chain.seq ORDER BY t.actor`

// readRequesters returns the Requesters of job seq's delivery.
func readRequesters(ctx context.Context, q querier, seq int64) ([]string, error) {
	rows, err := q.QueryContext(ctx, requestersSQL, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

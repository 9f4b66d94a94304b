package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Why a follow-up trigger started nothing (SubmitFollowup). Each is
// stored once with its trigger, so a re-poll never answers twice.
const (
	// RefusedNotDelivered: the pull request is not one the Gate delivered
	// for this repository.
	RefusedNotDelivered = "not_delivered"
	// RefusedClosed: the pull request is closed or merged.
	RefusedClosed = "pull_request_closed"
	// RefusedBusy: a job of the pull request is coding, pushing or
	// merging (one active job per pull request).
	RefusedBusy = "followup_busy"
	// RefusedLimit: the pull request has had the repository's
	// max_followups follow-up jobs.
	RefusedLimit = "followup_limit"
	// RefusedBaseMoved: the pull request's head is not a candidate of
	// the Gate's (someone pushed to its branch).
	RefusedBaseMoved = "base_moved"
	// RefusedBaseGone: the head is the Gate's candidate, but its
	// repository no longer holds it (the candidate ref expired).
	RefusedBaseGone = "base_gone"
)

// CodeSuperseded is the failure code of a delivery that a follow-up job
// took over while it waited for CI or a review: its commit stays on the
// branch, the follow-up builds on it.
const CodeSuperseded = "superseded"

// Followup is what a follow-up trigger (a command in a comment or review
// comment on a pull request) needs beside its job: the pull request, what
// GitHub said of it at trigger time, and the repository's limit.
type Followup struct {
	Open         bool   // the pull request is open
	HeadSHA      string // its head commit
	MaxFollowups int    // the repository's max_followups
}

// FollowupResult is SubmitFollowup's answer: a job started (Job), or the
// trigger refused (Refusal, no job), and Taken when the trigger was
// stored before (nothing written: Job.ID or Refusal is the earlier
// answer). Superseded names the job whose delivery the new job ended.
type FollowupResult struct {
	Job        Job
	Refusal    string
	Taken      bool
	Superseded string
	Ordinal    int // the new job's place among the pull request's follow-ups (1 first)
}

// chainSQL selects the jobs of a pull request (?1 repository, ?2
// number): those whose delivery reached it, and its follow-ups, with
// their status and delivery.
const chainSQL = `WITH chain(seq) AS (
  SELECT d.job_seq FROM deliveries d JOIN jobs j ON j.seq = d.job_seq WHERE d.pr_number = ?2 AND j.repository_id = ?1
  UNION SELECT job_seq FROM followups WHERE repository_id = ?1 AND number = ?2)
SELECT j.seq, j.id, j.status, j.event_count, d.phase, d.candidate_sha, d.branch
FROM chain JOIN jobs j ON j.seq = chain.seq LEFT JOIN deliveries d ON d.job_seq = j.seq ORDER BY j.seq`

type chainJob struct {
	seq, events              int64
	id, status               string
	phase, candidate, branch sql.NullString
}

// SubmitFollowup persists a follow-up job for trigger tr on pull request
// tr.Number (DECISIONS 18), in one durable transaction with tr, or
// stores tr as refused. The job's base must be f.HeadSHA and its delivery
// target the pull request's repository; the store decides, from what it
// holds: the pull request must be one the Gate delivered for the
// repository and open, f.HeadSHA a candidate delivered on it (else
// base_moved), no job of it coding, pushing or merging (followup_busy),
// fewer than f.MaxFollowups follow-ups before (followup_limit). A
// delivery of it waiting for CI or a review ends failed, superseded, in
// the same transaction: the new job's candidate will be pushed on top of
// it, to the same branch.
func (s *Store) SubmitFollowup(ctx context.Context, j NewJob, tr Trigger, f Followup, now time.Time) (FollowupResult, error) {
	if !tr.valid() || tr.Kind == TriggerLabel {
		return FollowupResult{}, invalid("malformed follow-up trigger")
	}
	if j.Kind != KindCoding || j.RepositoryID != tr.RepositoryID || j.Delivery == nil || j.BaseSHA != f.HeadSHA ||
		!ident.ValidSHA(f.HeadSHA) || f.MaxFollowups < 0 {
		return FollowupResult{}, invalid("follow-up job is not a delivered coding job on the pull request's head")
	}
	job, insert, err := s.submitOp(j, now)
	if err != nil {
		return FollowupResult{}, err
	}
	return s.followup(ctx, tr, f, job, insert, now)
}

// RefuseFollowupBaseGone answers follow-up trigger tr when the Gate's
// repository holds no candidate ref at f.HeadSHA, so no job can build on
// it: stored once with SubmitFollowup's verdict, or base_gone where that
// would have started a job.
func (s *Store) RefuseFollowupBaseGone(ctx context.Context, tr Trigger, f Followup, now time.Time) (FollowupResult, error) {
	if !tr.valid() || tr.Kind == TriggerLabel || !ident.ValidSHA(f.HeadSHA) || f.MaxFollowups < 0 {
		return FollowupResult{}, invalid("malformed follow-up trigger")
	}
	return s.followup(ctx, tr, f, Job{}, nil, now)
}

// followup decides trigger tr in one transaction and, when it starts a
// job, inserts job with insert (nil: base_gone instead).
func (s *Store) followup(ctx context.Context, tr Trigger, f Followup, job Job, insert func(t *wtx) error, now time.Time) (FollowupResult, error) {
	us := now.UnixMicro()
	var res FollowupResult
	err := s.w.do(ctx, func(t *wtx) error {
		res = FollowupResult{}
		earlier, refusal, found, err := t.storedTrigger(tr)
		if err != nil || found {
			res = FollowupResult{Job: Job{ID: earlier}, Refusal: refusal, Taken: true}
			return err
		}
		chain, count, err := t.chain(tr.RepositoryID, tr.Number)
		if err != nil {
			return err
		}
		reason, branch, supersede := followupVerdict(chain, count, f)
		if reason == "" && insert == nil {
			reason = RefusedBaseGone
		}
		if reason != "" {
			res.Refusal = reason
			_, err := t.exec(`INSERT INTO intake_refusals (repository_id, kind, event_id, number, actor, reason, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)`, tr.RepositoryID, tr.Kind, tr.EventID, tr.Number, tr.Actor, reason, us)
			return err
		}
		if supersede != nil {
			if err := t.supersede(*supersede, us); err != nil {
				return err
			}
			res.Superseded = supersede.id
		}
		if err := insert(t); err != nil {
			return err
		}
		if _, err := t.exec(`INSERT INTO intake_triggers (repository_id, kind, event_id, job_seq, number, actor, created_at)
VALUES (?, ?, ?, (SELECT seq FROM jobs WHERE id = ?), ?, ?, ?)`,
			tr.RepositoryID, tr.Kind, tr.EventID, job.ID, tr.Number, tr.Actor, us); err != nil {
			return err
		}
		res.Ordinal = count + 1
		_, err = t.exec(`INSERT INTO followups (job_seq, repository_id, number, ordinal, branch)
VALUES ((SELECT seq FROM jobs WHERE id = ?), ?, ?, ?, ?)`, job.ID, tr.RepositoryID, tr.Number, res.Ordinal, branch)
		return err
	})
	if err != nil {
		return FollowupResult{}, err
	}
	if !res.Taken && res.Refusal == "" {
		res.Job = job
	}
	return res, nil
}

// storedTrigger reports whether tr is stored: with the job it started,
// or as refused with the reason.
func (t *wtx) storedTrigger(tr Trigger) (jobID, refusal string, found bool, err error) {
	err = t.queryRow(triggerJobSQL, tr.RepositoryID, tr.Kind, tr.EventID).Scan(&jobID)
	if err == nil {
		return jobID, "", true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", "", false, err
	}
	err = t.queryRow(`SELECT reason FROM intake_refusals WHERE repository_id = ? AND kind = ? AND event_id = ?`,
		tr.RepositoryID, tr.Kind, tr.EventID).Scan(&refusal)
	if err == nil {
		return "", refusal, true, nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	return "", "", false, err
}

// chain returns the jobs of pull request number of repository, oldest
// first, and how many of them are follow-ups.
func (t *wtx) chain(repository string, number int64) ([]chainJob, int, error) {
	rows, err := t.query(chainSQL, repository, number)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []chainJob
	for rows.Next() {
		var c chainJob
		if err := rows.Scan(&c.seq, &c.id, &c.status, &c.events, &c.phase, &c.candidate, &c.branch); err != nil {
			return nil, 0, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	rows.Close()
	var count int
	if err := t.queryRow(`SELECT count(*) FROM followups WHERE repository_id = ? AND number = ?`, repository, number).Scan(&count); err != nil {
		return nil, 0, err
	}
	return out, count, nil
}

// followupVerdict decides a follow-up trigger on a pull request whose
// jobs are chain (count of them follow-ups): a refusal, or the branch to
// push to and the delivery to supersede (nil: none is waiting).
func followupVerdict(chain []chainJob, count int, f Followup) (reason, branch string, supersede *chainJob) {
	delivered := false
	for i, c := range chain {
		if c.branch.Valid && branch == "" {
			branch = c.branch.String
		}
		if c.phase.Valid && c.candidate.String == f.HeadSHA && c.phase.String != DeliveryPush {
			delivered = true
		}
		switch {
		case c.phase.String == DeliveryMerged:
			return RefusedClosed, "", nil
		case c.status == JobPending || c.status == JobLeased || c.status == JobRetryWait:
			reason = RefusedBusy
		case c.status == JobDelivering && (c.phase.String == DeliveryCI || c.phase.String == DeliveryReview):
			supersede = &chain[i]
		case c.status == JobDelivering:
			reason = RefusedBusy
		}
	}
	switch {
	case branch == "":
		return RefusedNotDelivered, "", nil
	case !f.Open:
		return RefusedClosed, "", nil
	case reason != "":
		return reason, "", nil
	case count >= f.MaxFollowups:
		return RefusedLimit, "", nil
	case !delivered:
		return RefusedBaseMoved, "", nil
	}
	return "", branch, supersede
}

// supersede ends c's delivery failed, superseded: a follow-up job takes
// its pull request over.
func (t *wtx) supersede(c chainJob, us int64) error {
	if _, err := t.exec(`UPDATE deliveries SET phase = 'failed', failure_code = ?, updated_at = ? WHERE job_seq = ?`,
		CodeSuperseded, us, c.seq); err != nil {
		return err
	}
	if _, err := t.exec(`UPDATE jobs SET status = 'failed', failure_code = ?, event_count = ?, updated_at = ? WHERE seq = ?`,
		CodeSuperseded, c.events+1, us, c.seq); err != nil {
		return err
	}
	t.events(c.seq, c.events+1, us, ev{typ: EventFailed, code: CodeSuperseded})
	return nil
}

// CodeCancelled is the failure code of an intake job a person cancelled
// on GitHub: the label removed from its issue, or its pull request
// closed.
const CodeCancelled = "cancelled"

// Cancelled is what CancelIntake ended: the jobs, and of those the
// attempts that were running (their lanes are told to stop).
type Cancelled struct {
	Jobs     []string
	Attempts []Expiry
}

// cancelSQL selects the unfinished jobs of issue or pull request ?2 of
// repository ?1: those its triggers started, those whose delivery reached
// it, and its follow-ups, with their attempt and delivery phase.
const cancelSQL = `WITH chain(seq) AS (
  SELECT job_seq FROM intake_triggers WHERE repository_id = ?1 AND number = ?2
  UNION SELECT d.job_seq FROM deliveries d JOIN jobs j ON j.seq = d.job_seq WHERE d.pr_number = ?2 AND j.repository_id = ?1
  UNION SELECT job_seq FROM followups WHERE repository_id = ?1 AND number = ?2)
SELECT j.seq, j.id, j.status, j.event_count, j.current_attempt, a.ordinal, a.lane, a.generation, d.phase
FROM chain JOIN jobs j ON j.seq = chain.seq
LEFT JOIN attempts a ON a.job_seq = j.seq AND a.id = j.current_attempt
LEFT JOIN deliveries d ON d.job_seq = j.seq
WHERE j.status <> 'succeeded' AND j.status <> 'failed' ORDER BY j.seq`

// CancelIntake ends every unfinished job of issue or pull request number
// of repositoryID failed, cancelled, in one transaction (DECISIONS 18:
// removing the label or closing the pull request cancels a running
// job): a queued or waiting job at once, a running attempt failed
// terminal (its lane is to be told, Cancelled.Attempts), a delivery
// before its merge phase failed with the same code. A delivery already
// merging is left to finish: its merge request may be on its way.
func (s *Store) CancelIntake(ctx context.Context, repositoryID string, number int64, now time.Time) (Cancelled, error) {
	if !ident.ValidID(repositoryID) || number < 1 || number > MaxGitHubID {
		return Cancelled{}, invalid("malformed issue")
	}
	us := now.UnixMicro()
	var out Cancelled
	err := s.w.do(ctx, func(t *wtx) error {
		out = Cancelled{}
		rows, err := t.query(cancelSQL, repositoryID, number)
		if err != nil {
			return err
		}
		type row struct {
			seq, events       int64
			id, status        string
			attempt, lane     sql.NullString
			generation, phase sql.NullString
			ordinal           sql.NullInt64
		}
		var due []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.seq, &r.id, &r.status, &r.events, &r.attempt, &r.ordinal, &r.lane, &r.generation, &r.phase); err != nil {
				rows.Close()
				return err
			}
			due = append(due, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range due {
			switch {
			case r.status == JobDelivering && r.phase.String == DeliveryMerge:
				continue
			case r.status == JobDelivering:
				if _, err := t.exec(`UPDATE deliveries SET phase = 'failed', failure_code = ?, updated_at = ? WHERE job_seq = ?`,
					CodeCancelled, us, r.seq); err != nil {
					return err
				}
			case r.status == JobLeased:
				if _, err := t.exec(`UPDATE attempts SET status = 'failed', completed_at = ?, disposition = 'terminal', failure_code = ?
WHERE job_seq = ? AND id = ? AND status = 'leased'`, us, CodeCancelled, r.seq, r.attempt.String); err != nil {
					return err
				}
				out.Attempts = append(out.Attempts, Expiry{JobID: r.id, AttemptID: r.attempt.String, Ordinal: int(r.ordinal.Int64),
					Lane: r.lane.String, Generation: r.generation.String, JobStatus: JobFailed})
			}
			if _, err := t.exec(`UPDATE jobs SET status = 'failed', current_attempt = NULL, retry_at = NULL, failure_code = ?,
  event_count = ?, updated_at = ? WHERE seq = ?`, CodeCancelled, r.events+1, us, r.seq); err != nil {
				return err
			}
			t.events(r.seq, r.events+1, us, ev{typ: EventFailed, code: CodeCancelled})
			out.Jobs = append(out.Jobs, r.id)
		}
		return nil
	})
	if err != nil {
		return Cancelled{}, err
	}
	return out, nil
}

// TriggerAnswer returns what trigger (repositoryID, kind, eventID) was
// answered when it was stored: the job it started, or why it started
// none; ok is false when it is not stored.
func (s *Store) TriggerAnswer(ctx context.Context, repositoryID, kind string, eventID int64) (jobID, refusal string, ok bool, err error) {
	err = s.read(ctx, func(q querier) error {
		jobID, refusal, ok = "", "", false
		err := q.QueryRowContext(ctx, triggerJobSQL, repositoryID, kind, eventID).Scan(&jobID)
		if err == nil {
			ok = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		err = q.QueryRowContext(ctx, `SELECT reason FROM intake_refusals WHERE repository_id = ? AND kind = ? AND event_id = ?`,
			repositoryID, kind, eventID).Scan(&refusal)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	return jobID, refusal, ok, err
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Trigger kinds: what on GitHub started an intake job (DECISIONS 17, 18).
// GitHub numbers each kind's events separately (issue events, issue
// comments, pull request review comments), so a trigger is unique per
// repository, kind and event id.
const (
	TriggerLabel         = "label"          // an issue's labeled event
	TriggerComment       = "comment"        // an issue or pull request conversation comment
	TriggerReviewComment = "review_comment" // a pull request review comment
)

// MaxGitHubID bounds the ids and numbers GitHub gives events and issues
// (JSON integers the API keeps below 2^53).
const MaxGitHubID = 1<<53 - 1

// Trigger is the GitHub event that starts an intake job.
type Trigger struct {
	RepositoryID string // the Gate's repository id; the job's
	Kind         string // TriggerLabel, TriggerComment or TriggerReviewComment
	EventID      int64  // GitHub's id of the event or comment
	Number       int64  // the or pull request's number
	Actor        string // the login of who labelled or commented
}

func (tr Trigger) valid() bool {
	switch tr.Kind {
	case TriggerLabel, TriggerComment, TriggerReviewComment:
	default:
		return false
	}
	return ident.ValidID(tr.RepositoryID) && tr.EventID >= 1 && tr.EventID <= MaxGitHubID &&
		tr.Number >= 1 && tr.Number <= MaxGitHubID && ident.ValidGitHubLogin(tr.Actor)
}

// triggerJobSQL selects the id of the job a trigger (repository, kind,
// event id) started.
const triggerJobSQL = `SELECT jobs.id FROM intake_triggers JOIN jobs ON jobs.seq = intake_triggers.job_seq
WHERE intake_triggers.repository_id = ? AND intake_triggers.kind = ? AND intake_triggers.event_id = ?`

// SubmitTrigger persists a new coding job for trigger tr, and tr with it,
// in one durable transaction (Submit's), unless tr is already stored:
// then it writes nothing and reports taken with the job tr started
// before. The job must be of tr's repository. However often a trigger is
// seen (a re-poll, a restart, two pollers at once), it starts one job.
func (s *Store) SubmitTrigger(ctx context.Context, j NewJob, tr Trigger, now time.Time) (job Job, taken bool, err error) {
	if !tr.valid() {
		return Job{}, false, invalid("malformed trigger")
	}
	if j.Kind != KindCoding || j.RepositoryID != tr.RepositoryID {
		return Job{}, false, invalid("trigger job is not a coding job of its repository")
	}
	job, insert, err := s.submitOp(j, now)
	if err != nil {
		return Job{}, false, err
	}
	var earlier string
	err = s.w.do(ctx, func(t *wtx) error {
		earlier = ""
		err := t.queryRow(triggerJobSQL,
			tr.RepositoryID, tr.Kind, tr.EventID).Scan(&earlier)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := insert(t); err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO intake_triggers (repository_id, kind, event_id, job_seq, number, actor, created_at)
VALUES (?, ?, ?, (SELECT seq FROM jobs WHERE id = ?), ?, ?, ?)`,
			tr.RepositoryID, tr.Kind, tr.EventID, j.ID, tr.Number, tr.Actor, now.UnixMicro())
		return err
	})
	if err != nil {
		return Job{}, false, err
	}
	if earlier != "" {
		return Job{ID: earlier}, true, nil
	}
	return job, false, nil
}

// TriggerJob returns the id of the job trigger (repositoryID, kind,
// eventID) started, and whether it is stored at all.
func (s *Store) TriggerJob(ctx context.Context, repositoryID, kind string, eventID int64) (jobID string, ok bool, err error) {
	err = s.read(ctx, func(q querier) error {
		err := q.QueryRowContext(ctx, triggerJobSQL,
			repositoryID, kind, eventID).Scan(&jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	return jobID, ok, err
}

// JobTrigger returns the trigger that started job id, and whether an
// intake trigger started it at all.
func (s *Store) JobTrigger(ctx context.Context, id string) (Trigger, bool, error) {
	if !ident.ValidRef(id) {
		return Trigger{}, false, nil
	}
	var tr Trigger
	err := s.read(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `SELECT intake_triggers.repository_id, intake_triggers.kind, intake_triggers.event_id, intake_triggers.number, intake_triggers.actor
FROM intake_triggers JOIN jobs ON jobs.seq = intake_triggers.job_seq WHERE jobs.id = ?`, id).
			Scan(&tr.RepositoryID, &tr.Kind, &tr.EventID, &tr.Number, &tr.Actor)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Trigger{}, false, nil
	}
	return tr, err == nil, err
}

// JobTask returns the canonical task of job id as it was submitted.
func (s *Store) JobTask(ctx context.Context, id string) ([]byte, error) {
	if !ident.ValidRef(id) {
		return nil, ErrNotFound
	}
	var task string
	err := s.read(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `SELECT task FROM jobs WHERE id = ?`, id).Scan(&task)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return []byte(task), err
}

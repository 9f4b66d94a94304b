package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Intake feeds whose since cursor the store keeps.
const (
	FeedIssues         = "issues"
	FeedComments       = "comments"
	FeedReviewComments = "review_comments"
)

// MaxPostedBytes bounds StatusComment.Posted.
const MaxPostedBytes = 256

func validFeed(f string) bool {
	return f == FeedIssues || f == FeedComments || f == FeedReviewComments
}

// IntakeCursor returns the since cursor of repositoryID's feed, and
// whether one is stored.
func (s *Store) IntakeCursor(ctx context.Context, repositoryID, feed string) (time.Time, bool, error) {
	if !ident.ValidID(repositoryID) || !validFeed(feed) {
		return time.Time{}, false, invalid("malformed intake cursor")
	}
	var us int64
	err := s.read(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `SELECT since FROM intake_cursors WHERE repository_id = ? AND feed = ?`,
			repositoryID, feed).Scan(&us)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return time.UnixMicro(us).UTC(), true, nil
}

// SetIntakeCursor stores the since cursor of repositoryID's feed.
func (s *Store) SetIntakeCursor(ctx context.Context, repositoryID, feed string, since time.Time) error {
	if !ident.ValidID(repositoryID) || !validFeed(feed) || since.IsZero() {
		return invalid("malformed intake cursor")
	}
	return s.w.do(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO intake_cursors (repository_id, feed, since) VALUES (?, ?, ?)
ON CONFLICT (repository_id, feed) DO UPDATE SET since = excluded.since`, repositoryID, feed, since.UnixMicro())
		return err
	})
}

// StatusComment is the one comment the Gate keeps on an issue or pull
// request: its GitHub id (0 until created), the job it reports, what it
// last said (Posted, a short key of the Gate's choosing) and whether
// that was the job's last word (Final).
type StatusComment struct {
	RepositoryID string
	Number       int64
	CommentID    int64
	JobID        string
	Posted       string
	Final        bool
	UpdatedAt    time.Time
}

func (c StatusComment) valid() bool {
	if !ident.ValidID(c.RepositoryID) || c.Number < 1 || c.Number > MaxGitHubID || c.CommentID < 0 || c.CommentID > MaxGitHubID ||
		(c.JobID != "" && !ident.ValidID(c.JobID)) || len(c.Posted) > MaxPostedBytes {
		return false
	}
	for i := 0; i < len(c.Posted); i++ {
		if c.Posted[i] < ' ' || c.Posted[i] > '~' {
			return false
		}
	}
	return true
}

const statusColumns = `repository_id, number, coalesce(comment_id, 0), coalesce(job_id, ''), posted, final, updated_at`

func scanStatus(sc interface{ Scan(...any) error }) (StatusComment, error) {
	var c StatusComment
	var final int
	var us int64
	err := sc.Scan(&c.RepositoryID, &c.Number, &c.CommentID, &c.JobID, &c.Posted, &final, &us)
	c.Final, c.UpdatedAt = final == 1, time.UnixMicro(us).UTC()
	return c, err
}

// IntakeStatus returns the status comment of issue or pull request
// number of repositoryID, and whether one is stored.
func (s *Store) IntakeStatus(ctx context.Context, repositoryID string, number int64) (StatusComment, bool, error) {
	if !ident.ValidID(repositoryID) || number < 1 || number > MaxGitHubID {
		return StatusComment{}, false, invalid("malformed intake status")
	}
	var c StatusComment
	err := s.read(ctx, func(q querier) error {
		var err error
		c, err = scanStatus(q.QueryRowContext(ctx, `SELECT `+statusColumns+` FROM intake_status WHERE repository_id = ? AND number = ?`,
			repositoryID, number))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return StatusComment{}, false, nil
	}
	return c, err == nil, err
}

// SetIntakeStatus stores c (replacing what the issue had).
func (s *Store) SetIntakeStatus(ctx context.Context, c StatusComment) error {
	if !c.valid() {
		return invalid("malformed intake status")
	}
	final := 0
	if c.Final {
		final = 1
	}
	var comment, job any
	if c.CommentID > 0 {
		comment = c.CommentID
	}
	if c.JobID != "" {
		job = c.JobID
	}
	return s.w.do(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO intake_status (repository_id, number, comment_id, job_id, posted, final, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (repository_id, number) DO UPDATE SET comment_id = excluded.comment_id, job_id = excluded.job_id,
  posted = excluded.posted, final = excluded.final, updated_at = excluded.updated_at`,
			c.RepositoryID, c.Number, comment, job, c.Posted, final, c.UpdatedAt.UnixMicro())
		return err
	})
}

// MaxOpenStatuses bounds OpenIntakeStatuses' answer.
const MaxOpenStatuses = 1000

// OpenIntakeStatuses returns the status comments that report a job and
// have not said their last word yet (at most MaxOpenStatuses, oldest
// first).
func (s *Store) OpenIntakeStatuses(ctx context.Context) ([]StatusComment, error) {
	var out []StatusComment
	err := s.read(ctx, func(q querier) error {
		out = nil
		rows, err := q.QueryContext(ctx, `SELECT `+statusColumns+` FROM intake_status
WHERE final = 0 AND job_id IS NOT NULL ORDER BY updated_at LIMIT ?`, MaxOpenStatuses)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := scanStatus(rows)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

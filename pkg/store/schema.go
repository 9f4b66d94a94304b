package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SchemaVersion is the schema version this build migrates databases to.
// forge doctor and the installer compare it with a database's recorded
// version (see ReadSchemaVersion).
const SchemaVersion = 5

// migrations returns the ordered schema steps: element i moves a database
// from version i to version i+1. Steps are append-only: never edit a
// released one. A new step comes with testdata/schema/schema-<i>.db.gz,
// a database written by the build before it (migrate_test.go).
func migrations() []string {
	return []string{
		// 1: policies, jobs, attempts, events, evidence, lanes. State checks with more
		// than two values are OR chains, not IN lists: SQLite builds a
		// throwaway lookup table for a longer IN list on every write it
		// checks, a measurable share of the writer's CPU.
		`
-- Canonical policy documents, each stored once: immutable rows, never
-- updated or deleted. A job references its policy by id, and each of its
-- attempts holds the same id: the attempt's policy is the identical
-- stored bytes of the job's.
CREATE TABLE policies (
  id   INTEGER PRIMARY KEY,
  body TEXT NOT NULL UNIQUE
);

CREATE TABLE jobs (
  seq             INTEGER PRIMARY KEY,
  id              TEXT NOT NULL UNIQUE,
  kind            TEXT NOT NULL CHECK (kind IN ('text', 'coding')),
  task            TEXT NOT NULL,
  pool            TEXT NOT NULL,
  plugin_id       TEXT NOT NULL,
  repository_id   TEXT CHECK ((kind = 'coding') = (repository_id IS NOT NULL)),
  default_branch  TEXT CHECK (kind = 'coding' OR default_branch IS NULL),
  prepared_path   TEXT CHECK (kind = 'coding' OR prepared_path IS NULL),
  base_sha        TEXT CHECK (base_sha IS NULL OR kind = 'coding' AND length(base_sha) = 40),
  test_args       TEXT CHECK (kind = 'coding' OR test_args IS NULL),
  policy_id       INTEGER NOT NULL REFERENCES policies (id),
  lease_ttl_us    INTEGER NOT NULL CHECK (lease_ttl_us > 0),
  retry_base_us   INTEGER NOT NULL CHECK (retry_base_us > 0),
  max_attempts    INTEGER NOT NULL CHECK (max_attempts >= 1),
  status          TEXT NOT NULL CHECK (status = 'pending' OR status = 'leased' OR status = 'retry_wait' OR status = 'delivering' OR status = 'succeeded' OR status = 'failed'),
  attempt_count   INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count BETWEEN 0 AND max_attempts),
  event_count     INTEGER NOT NULL CHECK (event_count >= 1),
  current_attempt TEXT,
  retry_at        INTEGER,
  failure_code    TEXT,
  result          TEXT,
  candidate_sha   TEXT CHECK (candidate_sha IS NULL OR length(candidate_sha) = 40),
  delivery_owner  TEXT,
  delivery_repo   TEXT,
  delivery_base   TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  CHECK ((delivery_owner IS NULL) = (delivery_repo IS NULL) AND (delivery_repo IS NULL) = (delivery_base IS NULL)),
  CHECK (delivery_repo IS NULL OR kind = 'coding'),
  CHECK (status <> 'delivering' OR delivery_repo IS NOT NULL),
  CHECK ((status = 'leased') = (current_attempt IS NOT NULL)),
  CHECK ((status = 'retry_wait') = (retry_at IS NOT NULL)),
  CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);
CREATE INDEX jobs_ready ON jobs (pool, seq) WHERE status IN ('pending', 'retry_wait');
CREATE INDEX jobs_retry ON jobs (retry_at) WHERE status = 'retry_wait';

CREATE TABLE attempts (
  job_seq         INTEGER NOT NULL REFERENCES jobs (seq),
  id              TEXT NOT NULL,
  ordinal         INTEGER NOT NULL CHECK (ordinal >= 1),
  lane            TEXT NOT NULL,
  generation      TEXT NOT NULL,
  policy_id       INTEGER NOT NULL REFERENCES policies (id),
  lease_ttl_us    INTEGER NOT NULL CHECK (lease_ttl_us > 0),
  kind            TEXT NOT NULL CHECK (kind IN ('text', 'coding')),
  max_attempts    INTEGER NOT NULL CHECK (max_attempts >= 1),
  retry_base_us   INTEGER NOT NULL CHECK (retry_base_us > 0),
  status          TEXT NOT NULL CHECK (status = 'leased' OR status = 'succeeded' OR status = 'failed' OR status = 'expired'),
  leased_at       INTEGER NOT NULL,
  deadline_at     INTEGER NOT NULL,
  completed_at    INTEGER,
  disposition     TEXT CHECK (disposition IS NULL OR disposition IN ('retryable', 'terminal')),
  failure_code    TEXT,
  candidate_sha   TEXT CHECK (candidate_sha IS NULL OR length(candidate_sha) = 40),
  agent_report    TEXT,
  outcome_digest  BLOB,
  heartbeat_at    INTEGER,
  evidence_batches INTEGER NOT NULL DEFAULT 0,
  evidence_records INTEGER NOT NULL DEFAULT 0,
  evidence_bytes  INTEGER NOT NULL DEFAULT 0,
  created_candidate TEXT CHECK (created_candidate IS NULL OR length(created_candidate) = 40),
  PRIMARY KEY (job_seq, id),
  CHECK ((status = 'leased') = (completed_at IS NULL))
) WITHOUT ROWID;
-- The leased attempts, by binding (a lane's busy check) and, scanned
-- whole, by deadline (the sweep): one partial index instead of two, so a
-- lease or a result changes one index b-tree fewer.
CREATE INDEX attempts_leased ON attempts (lane, generation, deadline_at) WHERE status = 'leased';

-- The job reference is checked at COMMIT (deferred): the writer inserts a
-- batch's events with multi-row INSERT OR FAIL statements, and an
-- immediate foreign key would make each of them open a statement journal.
CREATE TABLE events (
  job_seq INTEGER NOT NULL REFERENCES jobs (seq) DEFERRABLE INITIALLY DEFERRED,
  seq     INTEGER NOT NULL CHECK (seq >= 1),
  type    TEXT NOT NULL CHECK (type = 'submitted' OR type = 'leased' OR type = 'released' OR type = 'expired' OR type = 'attempt_failed' OR type = 'retry_scheduled' OR type = 'delivering' OR type = 'delivery' OR type = 'succeeded' OR type = 'failed'),
  at      INTEGER NOT NULL,
  attempt INTEGER CHECK (attempt IS NULL OR attempt >= 1),
  code    TEXT,
  PRIMARY KEY (job_seq, seq)
) WITHOUT ROWID;

CREATE TABLE evidence (
  job_seq    INTEGER NOT NULL,
  attempt_id TEXT NOT NULL,
  batch      INTEGER NOT NULL CHECK (batch >= 1),
  idx        INTEGER NOT NULL CHECK (idx >= 0),
  record     TEXT NOT NULL,
  PRIMARY KEY (job_seq, attempt_id, batch, idx),
  FOREIGN KEY (job_seq, attempt_id) REFERENCES attempts (job_seq, id)
) WITHOUT ROWID;

-- One row per delivered coding job, created when its coding attempt
-- succeeds; phase is the delivery state machine's (pkg/delivery), every
-- transition committed before its next side effect. Times in microseconds.
CREATE TABLE deliveries (
  job_seq        INTEGER PRIMARY KEY REFERENCES jobs (seq),
  candidate_sha  TEXT NOT NULL CHECK (length(candidate_sha) = 40),
  branch         TEXT NOT NULL,
  phase          TEXT NOT NULL CHECK (phase = 'push' OR phase = 'pull_request' OR phase = 'ci' OR phase = 'merge' OR phase = 'merged' OR phase = 'failed'),
  phase_attempts INTEGER NOT NULL DEFAULT 0 CHECK (phase_attempts >= 0),
  next_at        INTEGER NOT NULL,
  started_at     INTEGER NOT NULL,
  ci_started_at  INTEGER,
  pr_number      INTEGER CHECK (pr_number IS NULL OR pr_number >= 1),
  pr_url         TEXT,
  ci_state       TEXT,
  etag           TEXT,
  merge_sha      TEXT CHECK (merge_sha IS NULL OR length(merge_sha) = 40),
  failure_code   TEXT,
  updated_at     INTEGER NOT NULL,
  CHECK ((phase = 'failed') = (failure_code IS NOT NULL)),
  CHECK (phase <> 'merged' OR merge_sha IS NOT NULL)
);
CREATE INDEX deliveries_active ON deliveries (job_seq) WHERE phase <> 'merged' AND phase <> 'failed';

CREATE TABLE lanes (
  lane            TEXT PRIMARY KEY,
  worker_id       TEXT NOT NULL,
  slot            INTEGER NOT NULL CHECK (slot >= 0),
  generation      TEXT NOT NULL,
  connected       INTEGER NOT NULL CHECK (connected IN (0, 1)),
  connected_at    INTEGER NOT NULL,
  disconnected_at INTEGER
) WITHOUT ROWID;
`,
		// 2: an attempt's model gateway usage (DECISIONS 19), as its
		// Worker reported it with the result. NULL, as on every row
		// written before this step, means not metered: the attempt
		// had no metering Worker, or never reported (expired, lost).
		`
ALTER TABLE attempts ADD COLUMN usage_requests INTEGER CHECK (usage_requests IS NULL OR usage_requests >= 0);
ALTER TABLE attempts ADD COLUMN usage_input_tokens INTEGER CHECK (usage_input_tokens IS NULL OR usage_input_tokens >= 0);
ALTER TABLE attempts ADD COLUMN usage_output_tokens INTEGER CHECK (usage_output_tokens IS NULL OR usage_output_tokens >= 0);
ALTER TABLE attempts ADD COLUMN usage_cached_tokens INTEGER CHECK (usage_cached_tokens IS NULL OR usage_cached_tokens >= 0);
`,
		// 3: the GitHub events that started intake jobs (DECISIONS 17,
		// 18), each stored once, in the transaction that creates its
		// job (SubmitTrigger). Times in microseconds.
		`
CREATE TABLE intake_triggers (
  repository_id TEXT NOT NULL,
  kind          TEXT NOT NULL CHECK (kind = 'label' OR kind = 'comment' OR kind = 'review_comment'),
  event_id      INTEGER NOT NULL CHECK (event_id >= 1),
  job_seq       INTEGER NOT NULL UNIQUE REFERENCES jobs (seq),
  number        INTEGER NOT NULL CHECK (number >= 1),
  actor         TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (repository_id, kind, event_id)
) WITHOUT ROWID;
`,
		// 4: iteration on the pull requests the Gate delivered
		// (DECISIONS 18). deliveries gains the review phase (the merge
		// policy "review": after CI, waiting for an approval) and
		// push_over, the commit a follow-up's push requires the branch
		// to be at (its base; NULL: the branch must be absent), and is
		// rebuilt for the new phase check. followups links a follow-up
		// job to its pull request, numbered per pull request (the limit
		// counts them); intake_refusals keeps each follow-up trigger that
		// started nothing, once, with why.
		`
CREATE TABLE deliveries_4 (
  job_seq        INTEGER PRIMARY KEY REFERENCES jobs (seq),
  candidate_sha  TEXT NOT NULL CHECK (length(candidate_sha) = 40),
  branch         TEXT NOT NULL,
  phase          TEXT NOT NULL CHECK (phase = 'push' OR phase = 'pull_request' OR phase = 'ci' OR phase = 'review' OR phase = 'merge' OR phase = 'merged' OR phase = 'failed'),
  phase_attempts INTEGER NOT NULL DEFAULT 0 CHECK (phase_attempts >= 0),
  next_at        INTEGER NOT NULL,
  started_at     INTEGER NOT NULL,
  ci_started_at  INTEGER,
  pr_number      INTEGER CHECK (pr_number IS NULL OR pr_number >= 1),
  pr_url         TEXT,
  ci_state       TEXT,
  etag           TEXT,
  merge_sha      TEXT CHECK (merge_sha IS NULL OR length(merge_sha) = 40),
  failure_code   TEXT,
  updated_at     INTEGER NOT NULL,
  push_over      TEXT CHECK (push_over IS NULL OR length(push_over) = 40),
  CHECK ((phase = 'failed') = (failure_code IS NOT NULL)),
  CHECK (phase <> 'merged' OR merge_sha IS NOT NULL)
);
INSERT INTO deliveries_4 (job_seq, candidate_sha, branch, phase, phase_attempts, next_at, started_at, ci_started_at,
  pr_number, pr_url, ci_state, etag, merge_sha, failure_code, updated_at)
SELECT job_seq, candidate_sha, branch, phase, phase_attempts, next_at, started_at, ci_started_at,
  pr_number, pr_url, ci_state, etag, merge_sha, failure_code, updated_at FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_4 RENAME TO deliveries;
CREATE INDEX deliveries_active ON deliveries (job_seq) WHERE phase <> 'merged' AND phase <> 'failed';
CREATE INDEX deliveries_pr ON deliveries (pr_number) WHERE pr_number IS NOT NULL;

CREATE TABLE followups (
  job_seq       INTEGER PRIMARY KEY REFERENCES jobs (seq),
  repository_id TEXT NOT NULL,
  number        INTEGER NOT NULL CHECK (number >= 1),
  ordinal       INTEGER NOT NULL CHECK (ordinal >= 1),
  branch        TEXT NOT NULL,
  UNIQUE (repository_id, number, ordinal)
);

CREATE TABLE intake_refusals (
  repository_id TEXT NOT NULL,
  kind          TEXT NOT NULL CHECK (kind = 'label' OR kind = 'comment' OR kind = 'review_comment'),
  event_id      INTEGER NOT NULL CHECK (event_id >= 1),
  number        INTEGER NOT NULL CHECK (number >= 1),
  actor         TEXT NOT NULL,
  reason        TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (repository_id, kind, event_id)
) WITHOUT ROWID;
`,
		// 5: the intake poller's state (docs/intake.md): per repository
		// and feed the since cursor, and per issue or pull request its
		// one status comment, the job it reports and what it last said.
		`
CREATE TABLE intake_cursors (
  repository_id TEXT NOT NULL,
  feed          TEXT NOT NULL CHECK (feed = 'issues' OR feed = 'comments' OR feed = 'review_comments'),
  since         INTEGER NOT NULL,
  PRIMARY KEY (repository_id, feed)
) WITHOUT ROWID;
CREATE TABLE intake_status (
  repository_id TEXT NOT NULL,
  number        INTEGER NOT NULL CHECK (number >= 1),
  comment_id    INTEGER CHECK (comment_id IS NULL OR comment_id >= 1),
  job_id        TEXT,
  posted        TEXT NOT NULL,
  final         INTEGER NOT NULL CHECK (final IN (0, 1)),
  updated_at    INTEGER NOT NULL,
  PRIMARY KEY (repository_id, number)
) WITHOUT ROWID;
`,
	}
}

// ErrSchemaTooNew is returned by Open when the database was migrated by a
// newer build than this one.
var ErrSchemaTooNew = errors.New("store: database schema is newer than this build")

// migrate brings the database on conn to SchemaVersion inside one IMMEDIATE
// transaction. It always writes (the version row is rewritten even when no
// migration is pending), so startup proves the database is writable.
// Before it migrates a file database (path) of an older version V it
// writes a copy of it as it is (MigrationBackup).
func migrate(ctx context.Context, conn *sql.Conn, path string) (err error) {
	if path != "" {
		if err := backupBeforeMigrating(ctx, conn, path); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("store: migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL CHECK (version >= 0)
)`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	var version int
	err = conn.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		version, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("store: migrate: read version: %w", err)
	}
	steps := migrations()
	if version > len(steps) {
		return ErrSchemaTooNew
	}
	for v := version; v < len(steps); v++ {
		if _, err := conn.ExecContext(ctx, steps[v]); err != nil {
			return fmt.Errorf("store: migrate to version %d: %w", v+1, err)
		}
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO schema_version (id, version) VALUES (1, ?)
ON CONFLICT (id) DO UPDATE SET version = excluded.version`, len(steps)); err != nil {
		return fmt.Errorf("store: migrate: record version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("store: migrate: commit: %w", err)
	}
	return nil
}

// MigrationBackup is the copy Open makes of a file database of schema
// version (older than SchemaVersion) before migrating it: beside the
// database, named after it and the version ("forge.db.schema-3.backup").
// The migration itself is one transaction (all of it or nothing); the
// copy is what a build of that version opens again, should its operator go
// back (the installer's rollback puts it in place, docs/install.md).
func MigrationBackup(path string, version int) string {
	return fmt.Sprintf("%s.schema-%d.backup", path, version)
}

// backupBeforeMigrating writes MigrationBackup for the database at path
// when its recorded version is older than this build's (a new database
// or a current one needs none): VACUUM INTO a new file beside it, fsynced,
// checked (CheckCopy: integrity, application id, the same version), mode
// 0600, renamed over any earlier copy of that version, the directory
// fsynced. Any failure fails Open with nothing migrated.
func backupBeforeMigrating(ctx context.Context, conn *sql.Conn, path string) error {
	var version int
	err := conn.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&version)
	if err != nil || version < 1 || version >= SchemaVersion {
		return nil // new, current or too new: migrate decides
	}
	dst := MigrationBackup(path, version)
	tmp := dst + ".tmp-" + randomSuffix()
	fail := func(why string) error {
		os.Remove(tmp)
		return fmt.Errorf("store: migrate: backup of schema %d before migrating: %s", version, why)
	}
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		why := fail(sqliteReason(err))
		switch c := classify(err); {
		case errors.Is(c, ErrFull): // the Gate waits for space (storage_full)
			return fmt.Errorf("%w: %w", ErrFull, why)
		case errors.Is(c, ErrStorageIO):
			return fmt.Errorf("%w: %w", ErrStorageIO, why)
		}
		return why
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return fail(fsReason(err))
	}
	err = f.Chmod(0o600)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(fsReason(err))
	}
	info, err := CheckCopy(ctx, tmp)
	if err != nil || info.SchemaVersion != version {
		return fail("the copy does not check")
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fail(fsReason(err))
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("store: migrate: backup of schema %d: %s", version, fsReason(err))
	}
	return nil
}

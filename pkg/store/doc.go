// Package store is the Gate's authoritative SQLite state: schema and
// migrations, the file-permission preflight, group-committed writes, the
// job/attempt lifecycle with fencing, and the owner-API reads. It is the
// only package that imports modernc.org/sqlite.
//
// # Opening
//
// Open(ctx, dsn) accepts exactly these DSNs (anything else, and duplicate
// parameters, fail with a DSNError that never echoes the DSN):
//   - ":memory:", "file::memory:" with optional cache=private|shared, and
//     "file:NAME?mode=memory" / "file:?mode=memory" (optional cache);
//   - plain relative or absolute paths (relative to the working directory;
//     a leading ':' is rejected);
//   - file paths must be canonical: "a/./b", "a//b", "x/../b" and a
//     trailing '/' are rejected, not cleaned (CheckDSN applies these rules
//     without touching the file system, for config loading);
//   - "file:PATH", "file:/PATH", "file:///PATH" (percent-escapes decoded, no
//     authority, no fragment) with only mode=rwc and cache=private|shared.
//     cache is accepted but file databases always use private caches.
//
// On non-Unix systems file DSNs fail with ErrUnsupportedStorage.
//
// Before SQLite touches a file database, the preflight (InsecureError,
// matching ErrInsecure, naming a role such as "database parent directory"
// but never a path) requires:
//   - every ancestor above the immediate parent: a real directory, not a
//     symlink, owned by root or the effective UID, and not group- or
//     world-writable unless its sticky bit is set (like /tmp);
//   - the immediate parent: a real directory owned by the effective UID with
//     no group or world permission bits. If only it is missing it is created
//     with mode 0700 and re-verified; deeper missing levels are an error;
//   - the database and any existing -journal, -wal and -shm files: regular,
//     not symlinks, owned by the effective UID, mode exactly 0600. A missing
//     database is created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, and
//     verified through its descriptor, but only when no -journal, -wal or
//     -shm exists (a companion without its database is refused: SQLite
//     would silently delete or reuse it), so a refused start creates
//     nothing;
//   - the parent must be writable: a read-only file system or an
//     unwritable directory is reported as such, not as an SQLite error.
//
// Identity: every Agent Forge database carries SQLite's application_id
// ApplicationID ("AFRG"). Open stamps it on a new, empty database (with the
// page size) while still in rollback-journal mode, before switching to
// WAL, so the main file's header always has it. An existing non-empty file
// is refused with ErrForeignDatabase, before SQLite opens it, when its
// first 100 bytes are not a SQLite header carrying that id (another
// program's database, non-SQLite bytes, a truncated file); SQLite then
// re-checks the id and the schema version through the WAL before any
// write. Such a refusal, and ErrSchemaTooNew, leave the file unchanged. A
// zero-length file is a new database.
//
// Nothing existing is ever chmod-ed, removed or replaced. The checks are
// repeated on the database and its companions after SQLite opened them.
// The preflight trusts same-UID processes; it is not a race-free defense
// against them.
//
// Exclusivity: Open takes flock(LOCK_EX|LOCK_NB) on the database's parent
// directory, through a descriptor held until after every SQLite connection
// is closed; a second Store on the same directory (same or another
// process) fails with ErrLocked. The lock is on the directory, not the
// database file, on purpose: closing any descriptor of a file drops all of
// this process's POSIX (fcntl) locks on it, including SQLite's, so the store
// never opens and closes a descriptor of a database SQLite may hold (a
// refused second Open in the same process would otherwise break the first
// one's locks). Consequence: one Gate database per directory.
//
// SQLite runs with journal_mode=WAL and synchronous=FULL (both verified at
// Open), foreign_keys=ON and a busy timeout. If ctx is cancelled while Open
// runs SQLite, the error is the cancellation ("store: open interrupted",
// matching context.Canceled), not whichever check happened to fail. Open always migrates inside an
// IMMEDIATE transaction and records SchemaVersion in schema_version; a
// database from a newer build fails with ErrSchemaTooNew. Before it
// migrates a file database of an older version it writes a checked copy
// of it as it was beside it (MigrationBackup), which the installer's
// rollback puts back.
// ReadSchemaVersion(ctx, dsn) reads the recorded version without
// migrating, locking or creating files (for forge doctor and the
// installer); a file without the application id fails with
// ErrForeignDatabase rather than reading as version 0.
//
// # Writes: group commit
//
// Every write goes through one writer goroutine that owns the only write
// connection. It takes whatever is queued (up to 512 operations), runs
// BEGIN IMMEDIATE, executes the operations, COMMITs once, and then answers
// every caller. A nil error from a write method therefore means durable.
// A failing operation rolls back only itself: operations run without
// savepoints first (most failures are fencing refusals detected before any
// write); if one fails after writing, the transaction is rolled back and
// the batch re-run with a SAVEPOINT around each operation. Events are
// queued by operations and inserted for the whole batch with multi-row
// INSERT OR FAIL statements before COMMIT (and before any read in the
// same transaction); the events' job reference is checked at COMMIT, so
// no statement journal is opened for them.
//
// At low concurrency operations tend to arrive one by one, each during the
// previous commit, and would each commit alone. The writer expects the
// callers it has just answered to come back, and when that expected batch
// is small (at most 16 operations) and incomplete it waits up to 300 µs
// for it before BEGIN; a wait that finds nothing makes it skip lingering
// for a doubling number of batches. Nothing is answered before its
// COMMIT, as always.
//
// The driver re-prepares every statement on every execution (modernc has
// no statement cache), and subqueries and RETURNING are expensive to
// prepare, so the hot paths use a few simple statements: fencing reads the
// job, the attempt and the lane's live generation, and the write's own
// WHERE clause re-checks the binding, the leased state and the deadline;
// all inside the writer's transaction. CHECK constraints are limited to
// state enumerations and the key state invariants.
//
// A checkpointer on its own connection runs PASSIVE checkpoints every 64
// commits, so COMMIT never pays for one (the writer keeps a large
// wal_autocheckpoint as a backstop, 0 when Litestream replicates the
// database: OpenReplicated, replication.go). In sync replication a
// batch's answers wait for Litestream to confirm a sync covering its
// commit (litestream.go speaks its control socket). Reads of file databases use a separate read-only pool and a snapshot
// transaction; memory databases have one connection, so their reads are
// queued on the writer too. Stats reports commits and operations.
//
// # Lifecycle (all fencing in SQL, in the transaction that writes)
//
// No method reads the clock: the caller passes now, and timestamps are
// stored as UTC microseconds.
//
//	Submit(ctx, NewJob, now) (Job, error)
//	  pending job + "submitted". Policy must be canonical policy bytes; the
//	  plugin id, lease TTL, retry base and max attempts come from it.
//	SubmitAndLease(ctx, NewJob, LeaseRequest, now) (Job, *Lease, leaseErr, err error)
//	  Submit plus Lease for an idle lane in one transaction; the job is
//	  stored even when the lane cannot take it (leaseErr ErrStale or
//	  ErrLaneBusy, nil lease).
//	ConnectLane(ctx, lane, workerID, slot, generation, now) error
//	  the generation becomes the lane's live one; older generations fenced.
//	DisconnectLane(ctx, lane, generation, now) (bool, error)   compare-and-clear
//	MarkAllLanesDisconnected(ctx, now) (int, error)             at startup
//	Lease(ctx, lane, generation, pool, plugins, repositories, now) (*Lease, error)
//	  nil when nothing is eligible; ErrStale if the generation is not live,
//	  ErrLaneBusy if it already holds a leased attempt.
//	Heartbeat(ctx, Fence, now) (deadline time.Time, error)
//	HeartbeatUsage(ctx, Fence, *Usage, now) (deadline time.Time, error)
//	  the same, raising the attempt's usage to what the lane reported.
//	AddEvidence(ctx, Fence, batch, records, now) (replayed bool, error)
//	Complete(ctx, Fence, Outcome, now) (Completion, error)
//	CompleteAndLease(ctx, Fence, Outcome, LeaseRequest, now) (Completion, *Lease, error)
//	  the result and the same lane's next lease in one transaction (one
//	  commit per job per lane instead of two); never ErrLaneBusy.
//	Sweep(ctx, now) (SweepResult, error)   expiry + next due time
//	ExtendLeases(ctx, now) (int, error)    live lanes' leases to now + TTL at least
//	Probe(ctx) error                       one small committed write (a test write)
//	Stats() Stats                         commits and operations so far
//
// States: job pending -> leased -> succeeded | failed | retry_wait ->
// leased ...; attempt leased -> succeeded | failed | expired. Retryable
// failures and expiries schedule retry_at = now + policy.Backoff(retry_base,
// ordinal), written once; on the last allowed attempt the job fails with
// max_attempts_exceeded. Terminal failures fail the job with the attempt's
// failure code.
//
// Delivery: a coding job submitted with a DeliveryTarget does not end at
// its candidate: Complete makes it delivering and creates its deliveries
// row in phase push (event "delivering"). SaveDelivery commits each later
// state of pkg/delivery's machine, fenced by the phase it was computed
// from (ErrStale otherwise), with a "delivery" event per phase entered;
// merged ends the job succeeded, failed ends it failed with the delivery
// code. ActiveDeliveries lists what a starting Gate resumes.
//
// Intake (DECISIONS 17, 18): SubmitTrigger creates an intake job and its
// intake_triggers row (repository, trigger kind, GitHub event id; the
// job, the issue or pull request number, the actor, the time) in one
// savepoint of one transaction, or, when that trigger is already stored,
// writes nothing and answers taken with the job it started: a re-poll, a
// restart or a second poller never starts a second job for one event.
// TriggerJob reads that answer without writing.
//
// Iteration (DECISIONS 18): SubmitFollowup does the same for a command on
// a pull request the Gate delivered, and decides it from what the store
// holds about the pull request's jobs (the jobs whose delivery reached
// its number, and its follow-ups): refused (stored once in
// intake_refusals, with why) when the pull request is not the Gate's, is
// closed or merged, has a job coding, pushing or merging, has had
// max_followups follow-ups, or its head is not a delivered candidate;
// otherwise the follow-up job, its trigger and its followups row (the
// pull request, its ordinal, the branch) are written in one transaction
// that also ends a delivery of the pull request waiting for CI or a
// review failed, superseded. The follow-up's coding success creates a
// delivery to that branch with push_over = its base: a fast-forward.
//
// Fence errors (checked in this order): ErrNotFound (unknown attempt or
// other job), ErrStale (attempt bound to another lane/generation, finished,
// or the generation is no longer live), ErrExpired (attempt expired or now
// >= deadline), then per method ErrConflict (different replay) and
// ErrInvalid. Wire mapping: ErrStale/ErrNotFound -> stale, ErrExpired ->
// expired, ErrConflict -> conflict, ErrInvalid -> invalid, anything else
// -> unavailable. ErrLaneBusy
// is never the answer to a Worker request: only Lease returns it (and
// SubmitAndLease as its leaseErr), and those answer no request.
//
// Storage failures: a write that SQLite could not make because the file
// system is full fails with ErrFull (SQLITE_FULL), one that met an I/O
// error with ErrStorageIO (SQLITE_IOERR, which SQLite also reports for
// some ENOSPC cases, e.g. growing the -shm file); the original error stays
// in the chain. Either way the whole transaction was rolled back and no
// caller in it was answered nil; the store stays open, reads keep
// working, and a later write succeeds once space is back (Probe tests
// that). Open fails the same way when the file system has no room even
// to open the database (a new -shm wal-index after a clean stop). The
// Gate's storage_full mode is built on these (DECISIONS 20).
//
// # Reads
//
//	Job(ctx, id) (Job, error)
//	Events(ctx, id) ([]Event, error)
//	Aggregate(ctx, id) (Aggregate, error)
//	NextDue(ctx) (time.Time, bool, error)
//	DebugJobs(ctx, afterID, limit) ([]Job, error)                    newest first
//	DebugLanes(ctx, after, limit) ([]LaneState, error)              by lane name
//	DebugJob(ctx, id) (Job, []Attempt, error)
//	DebugEvents(ctx, id, afterSeq, limit) ([]Event, error)
//
// Job, Event, Attempt and Aggregate carry the docs/api.md JSON names and
// render timestamps as TimeFormat; absent values are omitted. Event.Seq is
// the event's persisted number within its job (1, 2, ...).
//
// # Layout
//
// jobs has an INTEGER PRIMARY KEY seq (submission order, the FIFO order of
// leasing) and a unique id. attempts, events and evidence are WITHOUT ROWID
// tables keyed by the job's seq first, so the rows of recently submitted
// jobs cluster at the end of their b-trees and a commit dirties few pages.
// Attempt ids are random 32-hex strings; the fence (job id, attempt id)
// finds an attempt through the job's seq. Canonical policies are interned:
// policies holds each distinct document once (immutable rows), a job and
// each of its attempts hold the same policy_id, so the attempt's policy is
// the job's stored bytes, byte for byte, and Lease returns exactly them.
// The writer caches committed ids in both directions, so neither a submit
// nor a lease runs a policy statement once a document is known.
package store

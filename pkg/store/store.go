package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Sentinel errors. Callers branch on them with errors.Is; the Gate maps them
// to HTTP and wire reject codes. None of them carries a value.
var (
	// ErrNotFound: no such job, or the attempt does not belong to the job.
	ErrNotFound = errors.New("store: not found")
	// ErrStale: the fence does not match the attempt's binding, the lane's
	// generation is no longer live (taken over or disconnected), or the
	// attempt already finished or was superseded.
	ErrStale = errors.New("store: stale attempt or generation")
	// ErrExpired: the attempt's deadline has passed (or the sweep expired it).
	ErrExpired = errors.New("store: attempt expired")
	// ErrConflict: a different result or evidence batch is already recorded,
	// or a job with this id already exists.
	ErrConflict = errors.New("store: conflicting write")
	// ErrInvalid: the request is well-formed Go but breaks a store rule (bad
	// id, wrong result kind, out-of-order evidence batch, ...).
	ErrInvalid = errors.New("store: invalid request")
	// ErrLaneBusy: the lane's live generation already holds a leased
	// attempt. Only Lease returns it (SubmitAndLease as its leaseErr).
	ErrLaneBusy = errors.New("store: lane already holds a lease")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrLocked: another Store (this or another process) has the database's
	// directory locked.
	ErrLocked = errors.New("store: database is in use by another process")
	// ErrInsecure matches every InsecureError from the permission preflight.
	ErrInsecure = errors.New("store: insecure database location")
	// ErrUnsupportedStorage: file databases are not supported on this OS.
	ErrUnsupportedStorage = errors.New("store: file-backed storage is not supported on this platform")
)

func invalid(reason string) error { return fmt.Errorf("%w: %s", ErrInvalid, reason) }

// Store is the Gate's authoritative SQLite state. All writes go through one
// writer goroutine that group-commits; reads use a separate read-only pool
// (file databases) or the writer's connection (memory databases). Methods
// are safe for concurrent use.
type Store struct {
	loc  location
	lock *fileLock
	wdb  *sql.DB
	rdb  *sql.DB // nil for memory databases
	ckpt *checkpointer
	w    *writer
	repl *litestream // nil unless replication is on

	policies policyCache

	closeOnce sync.Once
	closeErr  error
}

const (
	busyTimeoutMS  = 10000
	readConns      = 4
	writerCacheKiB = 32 << 10 // the writer's page cache (32 MiB)
	// pageSize for new databases (SQLite's default, stated explicitly:
	// 1 KiB pages made commits smaller but measured no clear gain here).
	pageSize = 4096
)

// Open validates dsn, runs the permission preflight for file databases,
// opens SQLite (WAL, synchronous=FULL, foreign keys, busy timeout), applies
// every pending migration, and starts the writer. Errors never contain the
// DSN or path.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenReplicated(ctx, dsn, Replication{})
}

// OpenReplicated is Open for a file database Litestream replicates (r):
// checkpoints are left to Litestream (the writer's wal_autocheckpoint is
// 0, the checkpointer runs PASSIVE only) and, in sync mode, a write is
// answered only after Litestream confirms a sync covering its commit
// (ErrUnreplicated otherwise).
func OpenReplicated(ctx context.Context, dsn string, r Replication) (_ *Store, err error) {
	loc, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if r.on() && loc.memory {
		return nil, invalid("a memory database cannot be replicated")
	}
	s := &Store{loc: loc}
	ok := false
	defer func() {
		if !ok {
			s.closeDBs()
		}
	}()
	var writerDSN string
	if loc.memory {
		writerDSN = loc.driver
	} else {
		if !fileStorageSupported {
			return nil, ErrUnsupportedStorage
		}
		s.lock, err = preflight(loc.path)
		if err != nil {
			return nil, err
		}
	}
	// From here on a cancelled ctx makes SQLite calls fail with errors that
	// would misname the cause; report the cancellation instead.
	defer func() {
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) &&
			!errors.Is(err, ErrForeignDatabase) && !errors.Is(err, ErrSchemaTooNew) && !errors.Is(err, ErrInsecure) {
			err = fmt.Errorf("store: open interrupted: %w", ctx.Err())
		}
		// A full file system (no room for the -shm wal-index, say) is
		// ErrFull or ErrStorageIO, as for a write.
		err = classify(err)
	}()
	if !loc.memory {
		// Litestream must see every WAL frame before it is checkpointed
		// away: with a replica the writer never checkpoints on its own.
		backstop := walBackstopPages
		if r.on() {
			backstop = 0
		}
		writerDSN = fileURI(loc.path) + "?mode=rwc&_txlock=immediate" +
			fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS) +
			"&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)" +
			fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)&_pragma=cache_size(-%d)", backstop, writerCacheKiB)
	}
	if loc.memory {
		writerDSN = appendParams(writerDSN, fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", busyTimeoutMS))
	}
	s.wdb, err = sql.Open("sqlite", writerDSN)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	// Nothing has been written yet: a foreign or too-new database is
	// refused here unchanged.
	fresh, err := identify(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if fresh {
		// A new, empty database: the page size (only effective before the
		// first write) and the application id are written in rollback
		// mode, so the main file's header carries the id before any WAL
		// exists (preflight's header check relies on that).
		for _, q := range []string{
			fmt.Sprintf("PRAGMA page_size = %d", pageSize),
			fmt.Sprintf("PRAGMA application_id = %d", ApplicationID),
		} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				conn.Close()
				return nil, fmt.Errorf("store: open: initialise database: %w", err)
			}
		}
	}
	if !loc.memory {
		var mode string
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil || mode != "wal" {
			conn.Close()
			return nil, errors.New("store: open: database is not in WAL mode")
		}
		var sync int
		if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
			conn.Close()
			return nil, errors.New("store: open: synchronous is not FULL")
		}
	}
	backupPath := ""
	if !loc.memory {
		backupPath = loc.path
	}
	if err := migrate(ctx, conn, backupPath); err != nil {
		conn.Close()
		return nil, err
	}
	if !loc.memory {
		if err := postOpenCheck(loc.path); err != nil {
			conn.Close()
			return nil, err
		}
		readerDSN := fileURI(loc.path) + "?mode=rw" +
			fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS) +
			"&_pragma=foreign_keys(1)&_pragma=query_only(1)"
		s.rdb, err = sql.Open("sqlite", readerDSN)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("store: open reader: %w", err)
		}
		s.rdb.SetMaxOpenConns(readConns)
		s.rdb.SetMaxIdleConns(readConns)
		s.rdb.SetConnMaxLifetime(0)
		s.rdb.SetConnMaxIdleTime(0)
	}
	var kick func()
	if !loc.memory {
		ckdb, err := sql.Open("sqlite", fileURI(loc.path)+"?mode=rw"+
			fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS)+"&_pragma=synchronous(FULL)")
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("store: open checkpointer: %w", err)
		}
		ckdb.SetMaxOpenConns(1)
		s.ckpt = newCheckpointer(ckdb)
		kick = s.ckpt.request
	}
	var held *syncedAnswers
	// A sync Litestream cannot confirm is retried for as long as one
	// sync may take.
	const syncRetryFor = litestreamSyncTimeout * time.Second
	if r.on() {
		s.repl = newLitestream(r.Socket, loc.path, (litestreamSyncTimeout+1)*time.Second)
		if r.Mode == ReplicationSync {
			base := context.WithoutCancel(ctx)
			held = newSyncedAnswers(func() error { return s.repl.syncWait(base) }, syncRetryFor)
		}
	}
	s.w, err = newWriter(ctx, conn, kick, held)
	if err != nil {
		conn.Close()
		return nil, err
	}
	ok = true
	return s, nil
}

func appendParams(dsn, params string) string {
	for i := 0; i < len(dsn); i++ {
		if dsn[i] == '?' {
			return dsn + "&" + params
		}
	}
	return dsn + "?" + params
}

// Close stops the writer (queued operations fail with ErrClosed), closes
// every SQLite connection, and only then releases the directory lock, so no
// descriptor to the database is ever closed while SQLite holds its locks.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.w != nil {
			s.w.stop()
		}
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.stop())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	s.lock.release()
	if s.repl != nil {
		s.repl.hc.CloseIdleConnections()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
)

// ApplicationID is the value of SQLite's header field application_id
// (PRAGMA application_id) in every Agent Forge database: the bytes "AFRG".
// Open stamps it on a new, empty database before anything else is written
// and refuses a non-empty database that does not carry it.
const ApplicationID = 0x41465247

// ErrForeignDatabase matches the refusal of a non-empty file that is not an
// Agent Forge database (not SQLite, truncated, or another application's
// SQLite database). Nothing is written to such a file.
var ErrForeignDatabase = errors.New("store: not an Agent Forge database")

func foreign(reason string) error { return fmt.Errorf("%w: %s", ErrForeignDatabase, reason) }

// sqliteHeaderBytes is the size of the SQLite file header.
const sqliteHeaderBytes = 100

// checkHeader decides from the first bytes of an existing database file
// (size is the whole file's size, hdr at most its first 100 bytes) whether
// SQLite may open it. An empty file is a new database. Anything else must
// be a SQLite file whose header carries ApplicationID: Open writes that
// field before the database leaves rollback-journal mode, so every
// non-empty Agent Forge database has it in the main file itself.
func checkHeader(hdr []byte, size int64) error {
	if size == 0 {
		return nil
	}
	if size < sqliteHeaderBytes || len(hdr) < sqliteHeaderBytes {
		return foreign("file is too short to be a SQLite database")
	}
	if string(hdr[:16]) != "SQLite format 3\x00" {
		return foreign("file is not a SQLite database")
	}
	if binary.BigEndian.Uint32(hdr[68:72]) != ApplicationID {
		return foreign("SQLite application id does not match")
	}
	return nil
}

// identify checks, on the writer connection and before any write, that the
// database SQLite opened is new (no pages) or an Agent Forge database whose
// schema this build knows. It reads through the WAL, so it also sees
// changes not yet checkpointed into the main file.
func identify(ctx context.Context, conn *sql.Conn) (fresh bool, err error) {
	var pages int64
	if err := conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return false, fmt.Errorf("store: open: read page count: %w", err)
	}
	if pages == 0 {
		return true, nil
	}
	var appID int64
	if err := conn.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return false, fmt.Errorf("store: open: read application id: %w", err)
	}
	if appID != ApplicationID {
		return false, foreign("SQLite application id does not match")
	}
	var tables int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'").Scan(&tables); err != nil {
		return false, fmt.Errorf("store: open: read schema: %w", err)
	}
	if tables == 0 {
		return false, nil
	}
	var version int
	err = conn.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: open: read schema version: %w", err)
	case version > SchemaVersion:
		return false, ErrSchemaTooNew
	}
	return false, nil
}

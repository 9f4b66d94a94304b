package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ReadSchemaVersion reports the schema version recorded in the file
// database named by dsn (0 for an empty file or an Agent Forge database not
// yet migrated; ErrForeignDatabase for a file without the Agent Forge
// application id) without
// migrating, locking or creating anything: it opens the file read-only
// (query_only; immutable when no -wal or -shm exists; refused when only one
// of them exists, since SQLite would create the other), so forge doctor and the installer can compare it with
// SchemaVersion while a Gate may be running. It runs no permission
// preflight (doctor checks paths itself) but refuses a missing database or
// one that is not a regular file. Errors never contain the path.
func ReadSchemaVersion(ctx context.Context, dsn string) (int, error) {
	loc, err := parseDSN(dsn)
	if err != nil {
		return 0, err
	}
	if loc.memory {
		return 0, errors.New("store: read schema version: not a file database")
	}
	if !fileStorageSupported {
		return 0, ErrUnsupportedStorage
	}
	fi, err := os.Lstat(loc.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, errors.New("store: read schema version: database does not exist")
	case err != nil:
		return 0, errors.New("store: read schema version: database cannot be inspected")
	case !fi.Mode().IsRegular():
		return 0, errors.New("store: read schema version: database is not a regular file")
	}
	if err := readIdentity(loc.path); err != nil {
		return 0, err
	}
	// A read-only connection still creates -wal and -shm when they are
	// missing. Without them the database is fully checkpointed (no Gate has
	// it open), so it is read as immutable: no locks and no new files.
	// A lone -wal or -shm is an unclean stop (or a stray file): SQLite would
	// create the missing companion, so the reader refuses instead.
	params := "?mode=ro"
	switch wal, shm := exists(loc.path+"-wal"), exists(loc.path+"-shm"); {
	case !wal && !shm:
		params += "&immutable=1"
	case wal != shm:
		return 0, errors.New("store: read schema version: the database has a -wal or -shm file without its companion (an unclean stop); start the Gate once to recover it")
	}
	db, err := sql.Open("sqlite", fileURI(loc.path)+params+
		fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS)+"&_pragma=query_only(1)")
	if err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var version int
	err = db.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil && strings.Contains(err.Error(), "no such table"):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return version, nil
}

// readIdentity applies checkHeader to the file at path, so a file that is
// not an Agent Forge database fails with ErrForeignDatabase instead of
// reading as version 0.
func readIdentity(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return errors.New("store: read schema version: database cannot be opened")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return errors.New("store: read schema version: database cannot be inspected")
	}
	hdr := make([]byte, sqliteHeaderBytes)
	n, err := io.ReadFull(f, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return errors.New("store: read schema version: database header cannot be read")
	}
	return checkHeader(hdr[:n], fi.Size())
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

package doctor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/0k-lab/agent-forge/pkg/install"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// maxCopy bounds the private copy of the database and its -wal.
const maxCopy = 1 << 30

// copyAttempts bounds the copies readSchemaCopy makes of a database that
// changed while it was copied.
const copyAttempts = 5

// readSchemaCopy reads the schema version from a private copy of the
// database and its -wal in a 0700 temporary directory it removes
// afterwards. The live files are only read: SQLite opening even a
// read-only connection to them would take locks and rewrite the -shm
// wal-index, which a running Gate shares (copyUnchanged says how the copy
// stays consistent without a lock).
func readSchemaCopy(ctx context.Context, f install.FS) (int, error) {
	dir, err := os.MkdirTemp("", "forge-doctor-")
	if err != nil {
		return 0, errors.New("no private directory for a copy of the database")
	}
	defer os.RemoveAll(dir)
	dst := filepath.Join(dir, "forge.db")
	if err := copyUnchanged(install.RealPath(f, install.Database), dst, copyFile); err != nil {
		return 0, err
	}
	v, err := store.ReadSchemaVersion(ctx, dst)
	if err != nil {
		return 0, errors.New("the database schema version cannot be read")
	}
	return v, nil
}

// copyUnchanged copies the database src and its -wal (when it has one) to
// dst with cp. A running Gate writes meanwhile: frames it appends to the
// WAL are harmless (SQLite reads a WAL up to its last whole commit), but a
// checkpoint followed by a WAL restart between the two copies would pair
// an older database with a newer WAL, which misses the frames the
// checkpoint moved. So the copy is made between two fingerprints (the
// database's identity, size and mtime; the WAL's identity and header,
// whose salts change at every restart; which companions exist) and made
// again, up to copyAttempts times, when they differ. The copy gets an
// empty -shm when src has one: SQLite rebuilds the wal-index from the
// copied WAL, where the live one, rewritten by the Gate all the time,
// could be read torn. A -wal or -shm without its companion is copied as
// such (ReadSchemaVersion refuses it: an unclean stop).
func copyUnchanged(src, dst string, cp func(src, dst string, max int64) (int64, error)) error {
	for range copyAttempts {
		before, err := fingerprint(src)
		if err != nil {
			return err
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(dst + suffix)
		}
		n, err := cp(src, dst, maxCopy)
		if err == nil && before.wal {
			_, err = cp(src+"-wal", dst+"-wal", maxCopy-n)
		}
		if err == nil && before.shm {
			err = os.WriteFile(dst+"-shm", nil, 0o600)
		}
		if err != nil {
			return errors.New("the database cannot be copied for reading: " + err.Error())
		}
		after, err := fingerprint(src)
		if err != nil {
			return err
		}
		if after == before {
			return nil
		}
	}
	return errors.New("the database kept changing while it was copied; run doctor again")
}

// dbPrint is what copyUnchanged compares before and after a copy.
type dbPrint struct {
	dev, ino   uint64
	size       int64
	mtime      int64
	wal, shm   bool
	walDev     uint64
	walIno     uint64
	walHeader  [32]byte
	walHeaderN int
}

func fingerprint(src string) (dbPrint, error) {
	var p dbPrint
	fi, err := os.Lstat(src)
	if err != nil {
		return p, errors.New("the database cannot be inspected")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return p, errors.New("the database cannot be inspected")
	}
	p.dev, p.ino, p.size, p.mtime = uint64(st.Dev), uint64(st.Ino), fi.Size(), fi.ModTime().UnixNano()
	if _, err := os.Lstat(src + "-shm"); err == nil {
		p.shm = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return p, errors.New("the database's -shm cannot be inspected")
	}
	w, err := os.OpenFile(src+"-wal", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, errors.New("the database's -wal cannot be opened")
	}
	defer w.Close()
	wi, err := w.Stat()
	if err != nil {
		return p, errors.New("the database's -wal cannot be inspected")
	}
	ws, ok := wi.Sys().(*syscall.Stat_t)
	if !ok {
		return p, errors.New("the database's -wal cannot be inspected")
	}
	p.wal, p.walDev, p.walIno = true, uint64(ws.Dev), uint64(ws.Ino)
	n, err := io.ReadFull(w, p.walHeader[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return p, errors.New("the database's -wal cannot be read")
	}
	p.walHeaderN = n
	return p, nil
}

// copyFile copies a regular, non-symlink file of at most max bytes.
func copyFile(src, dst string, max int64) (int64, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, errors.New("a database file cannot be opened")
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, errors.New("a database file is not a regular file")
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, errors.New("the copy cannot be created")
	}
	defer out.Close()
	n, err := io.Copy(out, io.LimitReader(in, max+1))
	if err != nil {
		return 0, errors.New("a database file cannot be read")
	}
	if n > max {
		return 0, errors.New("the database is larger than the 1 GiB a read-only check copies")
	}
	return n, nil
}

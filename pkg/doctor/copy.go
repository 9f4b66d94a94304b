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

// maxCopy bounds the private copy of the database and its companions.
const maxCopy = 1 << 30

// readSchemaCopy reads the schema version from a private copy of the
// database and its -wal and -shm (those that exist) in a 0700 temporary
// directory it removes afterwards. The live files are only read: SQLite
// opening even a read-only connection to them would take locks and
// rewrite the -shm wal-index, which a running Gate shares.
func readSchemaCopy(ctx context.Context, f install.FS) (int, error) {
	dir, err := os.MkdirTemp("", "forge-doctor-")
	if err != nil {
		return 0, errors.New("no private directory for a copy of the database")
	}
	defer os.RemoveAll(dir)
	var total int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		src := install.RealPath(f, install.Database+suffix)
		if _, err := os.Lstat(src); suffix != "" && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		n, err := copyFile(src, filepath.Join(dir, "forge.db"+suffix), maxCopy-total)
		if err != nil {
			return 0, errors.New("the database cannot be copied for reading: " + err.Error())
		}
		total += n
	}
	v, err := store.ReadSchemaVersion(ctx, filepath.Join(dir, "forge.db"))
	if err != nil {
		return 0, errors.New("the database schema version cannot be read")
	}
	return v, nil
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

package worker

import (
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Attempt files: everything an attempt's plugin or checks can write (its
// container, its git directory, a static registration's worktree
// administrative directory, and, without a sandbox, the shared
// repository) is read by the Worker through file descriptors, one place:
// the directory is opened without following a symbolic link, each name
// beneath it is opened component by component from that descriptor
// (openat with O_NOFOLLOW on Linux, attemptfs_linux.go), the opened file
// is checked with fstat (a regular file, or what it is instead), and its
// bytes are read up to a bound. A symbolic link, a FIFO, a huge or sparse
// file, or a directory swapped in for a file never makes the Worker
// follow it, block on it or read past the bound.

// maxMetaFile bounds one git metadata file the Worker reads from an
// attempt (HEAD, a .git file, config, a hook): the shared files the
// Worker saves have the same bound (maxSharedFile).
const maxMetaFile = maxSharedFile

// maxLinkTarget bounds a symbolic link target the Worker reads.
const maxLinkTarget = 4096

type attemptFileError string

func (e attemptFileError) Error() string { return string(e) }

// errNotRegular: the name is not a regular file (a symbolic link, a
// directory, a FIFO, ...).
const errNotRegular = attemptFileError("not a regular file")

// errTooLarge: the file is larger than the bound.
const errTooLarge = attemptFileError("file too large")

// readAttemptFile reads the regular file at path, at most max bytes: the
// directory holding it is opened by path (its own last component not
// followed), the file beneath it without following a symbolic link.
// Absence is fs.ErrNotExist; a file of another type errNotRegular; a
// larger one errTooLarge.
func readAttemptFile(path string, max int64) ([]byte, error) {
	dir, err := openDirNoFollow(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return readBeneath(dir, filepath.Base(path), max)
}

// readBeneath reads the regular file name (slash-separated, relative)
// beneath dir, at most max bytes.
func readBeneath(dir *os.File, name string, max int64) ([]byte, error) {
	f, fi, err := openBeneath(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	if fi.Size() > max {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errTooLarge // it grew while read
	}
	return b, nil
}

// hashBeneath writes what name beneath dir is into h, as digests compare
// it: "absent", a symbolic link's target, a regular file's mode and
// contents (at most max bytes: a larger file is hashed as "oversized"
// with its size, never read), or the type of anything else. Only a
// failure to read (not what the attempt shaped) is an error.
func hashBeneath(h hash.Hash, dir *os.File, name string, max int64) error {
	f, fi, err := openBeneath(dir, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h.Write([]byte(name + "\x00absent\x00"))
		return nil
	case errors.Is(err, errNotDirectory):
		h.Write([]byte(name + "\x00unreachable\x00"))
		return nil
	case errors.Is(err, errSymlink):
		t, err := readlinkBeneath(dir, name)
		if err != nil {
			return err
		}
		h.Write([]byte(name + "\x00symlink\x00" + t + "\x00"))
		return nil
	case err != nil:
		return err
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		h.Write([]byte(name + "\x00" + fi.Mode().Type().String() + "\x00"))
		return nil
	}
	if fi.Size() > max {
		h.Write([]byte(name + "\x00oversized\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00"))
		return nil
	}
	h.Write([]byte(name + "\x00" + fi.Mode().String() + "\x00"))
	n, err := io.Copy(h, io.LimitReader(f, max+1))
	if err != nil {
		return err
	}
	if n > max {
		h.Write([]byte("\x00oversized\x00"))
	}
	h.Write([]byte("\x00" + strconv.FormatInt(n, 10) + "\x00"))
	return nil
}

// splitRel splits a relative slash-separated name into its components;
// false for an empty, absolute or dot-dot name.
func splitRel(name string) ([]string, bool) {
	if name == "" || strings.HasPrefix(name, "/") {
		return nil, false
	}
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, false
		}
	}
	return parts, true
}

package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// maxUSTARTime is the largest modification time a USTAR header can hold
// (eleven octal digits).
const maxUSTARTime = 1<<33 - 1

// gzipOSUnknown is the fixed gzip header OS byte.
const gzipOSUnknown = 255

// writeArchive creates out exclusively and fills it with the reproducible
// archive of dir's regular files. On failure it removes the file it created.
func writeArchive(dir, out string, mtime int64) (err error) {
	if mtime < 0 || mtime > maxUSTARTime {
		return errors.New("modification time out of range")
	}
	entries, err := os.ReadDir(dir) // sorted by name, byte-wise
	if err != nil {
		return errors.New("read member directory")
	}
	if len(entries) == 0 {
		return errors.New("member directory is empty")
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errors.New("archive already exists")
		}
		return errors.New("create archive")
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(out)
		}
	}()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return errors.New("start gzip stream")
	}
	zw.Header = gzip.Header{OS: gzipOSUnknown}
	tw := tar.NewWriter(zw)
	modTime := time.Unix(mtime, 0)
	for _, e := range entries {
		if err := addMember(tw, dir, e.Name(), modTime); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return errors.New("finish tar stream")
	}
	if err := zw.Close(); err != nil {
		return errors.New("finish gzip stream")
	}
	if err := f.Sync(); err != nil {
		return errors.New("sync archive")
	}
	if err := f.Close(); err != nil {
		return errors.New("close archive")
	}
	return nil
}

// addMember appends one regular file with normalized metadata.
func addMember(tw *tar.Writer, dir, name string, modTime time.Time) error {
	path := filepath.Join(dir, name)
	info, err := os.Lstat(path)
	if err != nil {
		return errors.New("inspect member")
	}
	if !info.Mode().IsRegular() {
		return errors.New("member is not a regular file")
	}
	mode := int64(0o644)
	if info.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     info.Size(),
		Mode:     mode,
		ModTime:  modTime,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return errors.New("write member header")
	}
	src, err := os.Open(path)
	if err != nil {
		return errors.New("open member")
	}
	defer src.Close()
	n, err := io.Copy(tw, src)
	if err != nil || n != info.Size() {
		return errors.New("member changed while archiving")
	}
	return nil
}

//go:build unix

package github

import (
	"crypto/rsa"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrKeyFileUnsafe: the App key file or its directory breaks the
// file-safety rule of LoadPrivateKeyFile.
var ErrKeyFileUnsafe = errors.New("github: the private key must be an owned regular 0600 file in an owned directory that is not group/world writable")

// Errors of ReadProtectedFile.
var (
	ErrFileUnsafe   = errors.New("github: the file must be an owned regular 0600 file in an owned directory that is not group/world writable")
	ErrFileTooLarge = errors.New("github: the file is too large")
)

// ReadProtectedFile reads the file at path under the owner-only rule
// shared by the App key and forge-github's config: an absolute, clean
// path to a regular file of mode exactly 0600 owned by the effective UID
// (opened without following a symlink and checked on the open
// descriptor), in a real directory owned by the effective UID that is
// not group/world writable, of at most limit bytes. Errors are
// fs.ErrNotExist, ErrFileTooLarge or ErrFileUnsafe; none names the path.
func ReadProtectedFile(path string, limit int64) ([]byte, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, ErrFileUnsafe
	}
	euid := uint32(os.Geteuid())
	owned := func(fi fs.FileInfo) bool {
		st, ok := fi.Sys().(*syscall.Stat_t)
		return ok && st.Uid == euid
	}
	di, err := os.Lstat(filepath.Dir(path))
	if err != nil || !di.IsDir() || !owned(di) || di.Mode().Perm()&0o022 != 0 {
		return nil, ErrFileUnsafe
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, ErrFileUnsafe
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !owned(fi) || fi.Mode().Perm() != 0o600 {
		return nil, ErrFileUnsafe
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		clear(data)
		return nil, ErrFileUnsafe
	}
	if int64(len(data)) > limit {
		clear(data)
		return nil, ErrFileTooLarge
	}
	return data, nil
}

// LoadPrivateKeyFile reads and parses the App's private key at path, a
// file under the rule of ReadProtectedFile. Errors are ErrKeyFileUnsafe
// or ErrKey and name no path or value.
func LoadPrivateKeyFile(path string) (*rsa.PrivateKey, error) {
	data, err := ReadProtectedFile(path, MaxKeyBytes)
	switch {
	case errors.Is(err, ErrFileTooLarge):
		return nil, ErrKey
	case err != nil:
		return nil, ErrKeyFileUnsafe
	}
	defer clear(data)
	return ParsePrivateKey(data)
}

package source

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Fixed reasons of CheckRoot and CheckGit (never a path).
var (
	errRootMissing   = errors.New("must be an existing directory")
	errRootCanonical = errors.New("must be a canonical absolute path (no symlinks)")
	errRootOwner     = errors.New("must be owned by the Gate's user")
	errRootPrivate   = errors.New("must be private (no group or world permissions)")
	errGitCanonical  = errors.New("must be the canonical absolute path of the executable (no symlinks)")
	errGitFile       = errors.New("must be an executable regular file")
	errGitWritable   = errors.New("must not be group- or world-writable")
)

// CheckRoot requires the public repository root to be an existing
// directory at its canonical absolute path, owned by this process's
// effective user, with no group or world permission bits. The error is
// fixed text.
func CheckRoot(path string) error {
	if !canonical(path) {
		return errRootCanonical
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return errRootCanonical
		}
		return errRootMissing
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		return errRootCanonical
	}
	if !ownedByMe(fi) {
		return errRootOwner
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return errRootPrivate
	}
	return nil
}

// CheckGit requires the git executable to be named by its canonical
// absolute path and to be an executable regular file that is not group-
// or world-writable. The error is fixed text.
func CheckGit(path string) error {
	if !canonical(path) {
		return errGitCanonical
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		if err != nil {
			return errGitFile
		}
		return errGitCanonical
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return errGitFile
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return errGitWritable
	}
	return nil
}

// ValidPath reports whether p has the shape of a configured path: what
// ident.ValidRepositoryPath accepts, short enough that a prepared
// repository under it still fits a lease.
func ValidPath(p string) bool { return canonical(p) }

func canonical(p string) bool {
	return len(p) <= maxPathBytes && ident.ValidRepositoryPath(p)
}

// maxPathBytes leaves room for "/" + DirName under a root.
const maxPathBytes = ident.MaxRepositoryPathBytes - 1 - 2*sha256.Size - len(".git")

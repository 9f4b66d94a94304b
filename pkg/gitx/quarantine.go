package gitx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// A quarantine is where a received pack is indexed and checked before it
// joins a repository: a bare repository, written by hand (no template, no
// hooks, one process less than git init), whose objects/info/alternates
// names the repository's objects, so git reads the repository's history
// there and writes only into the quarantine. Once every check passes,
// MovePacks moves the quarantine's packs in; until then the repository
// holds nothing of it, and removing the quarantine undoes everything.

// Quarantine creates a quarantine repository at dir (which must not
// exist) reading the objects of the repository repo.
func Quarantine(dir, repo string) error {
	files := []struct{ name, data string }{
		{"HEAD", "ref: refs/heads/main\n"},
		{"config", "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"},
		{filepath.Join("objects", "info", "alternates"), filepath.Join(repo, "objects") + "\n"},
	}
	err := errors.Join(os.MkdirAll(filepath.Join(dir, "refs", "heads"), 0o700),
		os.MkdirAll(filepath.Join(dir, "objects", "info"), 0o700),
		os.MkdirAll(filepath.Join(dir, "objects", "pack"), 0o700))
	for _, f := range files {
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f.name), []byte(f.data), 0o600)
		}
	}
	return err
}

// MovePacks moves the packs of the directory from into the pack
// directory to: each pack before its reverse index and its index (git
// sees a pack once its index is there); a pack already there (same
// name, same content) is left as it is. Nothing but packs is moved.
func MovePacks(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, suffix := range []string{".pack", ".rev", ".idx"} {
		for _, e := range ents {
			name := e.Name()
			if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, suffix) || !e.Type().IsRegular() {
				continue
			}
			if _, err := os.Lstat(filepath.Join(to, name)); err == nil {
				continue
			}
			if err := os.Rename(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

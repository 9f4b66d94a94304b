package agent

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// RunDir is one run's private directory (mode 0700): the agent's private
// home and configuration directories, the structured-answer files. It is
// created inside the plugin's private working directory when the Worker
// gave it one (outside every temporary directory the agent may write), and
// removed with everything in it when the run ends. Two runs never share
// one, so concurrent lanes share no agent file.
type RunDir struct {
	Path string
}

// NewRunDir creates a fresh private run directory under parent ("": the
// system temporary directory).
func NewRunDir(agent, parent string) (*RunDir, error) {
	dir, err := os.MkdirTemp(parent, "forge-"+agent+"-")
	if err != nil {
		return nil, NewError(agent, ReasonSetup)
	}
	return &RunDir{Path: dir}, nil
}

// Join returns a path inside the run directory.
func (d *RunDir) Join(name ...string) string {
	return filepath.Join(append([]string{d.Path}, name...)...)
}

// Home creates a private directory (0700) named name in the run directory
// and seeds it with files, each written read-only (0400) under its
// relative path (parent directories 0700). It returns the directory.
func (d *RunDir) Home(name string, files map[string][]byte) (string, error) {
	home := d.Join(name)
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", err
	}
	for rel, data := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o400); err != nil {
			return "", err
		}
	}
	return home, nil
}

// Remove deletes the run directory even where the agent (or a tool it
// ran) left directories without write permission.
func (d *RunDir) Remove() error {
	if err := os.RemoveAll(d.Path); err == nil {
		return nil
	}
	filepath.WalkDir(d.Path, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(d.Path)
}

// ReadBounded returns a file's content, or nil when it is missing,
// unreadable, a symbolic link, not a regular file or longer than limit. It
// never blocks on a FIFO.
func ReadBounded(path string, limit int64) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(data)) > limit {
		return nil
	}
	return data
}

// WritePrivate writes a file only this user can read (0600).
func WritePrivate(path string, data []byte) error {
	return os.WriteFile(path, data, 0o600)
}

//go:build !linux

package worker

import (
	"errors"
	"os"
)

// statDir returns the state of directory d (see dirState). There is no
// Landlock here, so no sandbox to keep fresh: the modification time alone
// does.
func statDir(d string) dirState {
	fi, err := os.Stat(d)
	if err != nil {
		return dirState{}
	}
	return dirState{ino: 1, mtime: fi.ModTime().UnixNano()}
}

// dirWatch has nothing to watch with here: the directories are stated.
type dirWatch struct{}

func newDirWatch() *dirWatch            { return &dirWatch{} }
func (w *dirWatch) open() error         { return errors.ErrUnsupported }
func (w *dirWatch) add(...string) error { return errors.ErrUnsupported }
func (w *dirWatch) armed() bool         { return false }
func (w *dirWatch) changed() bool       { return true }
func (w *dirWatch) close()              {}

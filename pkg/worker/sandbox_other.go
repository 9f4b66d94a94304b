//go:build !linux

package worker

import "os"

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

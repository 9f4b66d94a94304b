//go:build unix

package store

import (
	"errors"
	"syscall"
)

// StatSpace reports the space of the file system holding dir (statfs).
// The error never names dir.
func StatSpace(dir string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Space{}, errors.New("store: cannot read the state file system's free space")
	}
	bs := uint64(st.Bsize)
	return Space{Free: uint64(st.Bavail) * bs, Total: uint64(st.Blocks) * bs}, nil
}

package worker

import "syscall"

// statDir returns the state of directory d (see dirState): one stat,
// nothing allocated.
func statDir(d string) dirState {
	var st syscall.Stat_t
	if syscall.Stat(d, &st) != nil {
		return dirState{}
	}
	return dirState{dev: st.Dev, ino: st.Ino, mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec}
}

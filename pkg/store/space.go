package store

import "path/filepath"

// Space is what a file system has: Free is the bytes an unprivileged
// writer may still use (statfs f_bavail), Total its size.
type Space struct {
	Free, Total uint64
}

// DefaultFloorBytes is the least free-space floor of the state file
// system (DECISIONS 20): the floor is the larger of it and
// DefaultFloorPercent of the file system, unless configured.
const (
	DefaultFloorBytes   = 64 << 20
	DefaultFloorPercent = 5
)

// The bounds of a configured floor (gate.json free_space_floor_bytes).
const (
	MinFloorBytes = 1 << 20
	MaxFloorBytes = 1 << 50
)

// Floor is the free-space floor of a file system of total bytes:
// configured when positive, else the larger of DefaultFloorBytes and
// DefaultFloorPercent of total.
func Floor(total uint64, configured int64) uint64 {
	if configured > 0 {
		return uint64(configured)
	}
	return max(DefaultFloorBytes, total/100*DefaultFloorPercent)
}

// StateDir names the directory holding the database of dsn (its -wal and
// -shm files too), the state file system's mount point for the free-space
// floor; ok is false for a memory database.
func StateDir(dsn string) (dir string, ok bool, err error) {
	loc, err := parseDSN(dsn)
	if err != nil || loc.memory {
		return "", false, err
	}
	return filepath.Dir(loc.path), true, nil
}

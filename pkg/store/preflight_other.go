//go:build !unix

package store

// InsecureError says which preflight rule a database location broke. On
// this platform file databases are unsupported, so it is never returned.
type InsecureError struct {
	Object string
	Reason string
}

func (e *InsecureError) Error() string {
	return "store: insecure database location: " + e.Object + " " + e.Reason
}

// Is makes errors.Is(err, ErrInsecure) true for every InsecureError.
func (e *InsecureError) Is(target error) bool { return target == ErrInsecure }

type fileLock struct{}

func (l *fileLock) release() {}

func preflight(string) (*fileLock, error) { return nil, ErrUnsupportedStorage }

func postOpenCheck(string) error { return ErrUnsupportedStorage }

const fileStorageSupported = false

func lockForRestore(string) (*fileLock, int, int, error) { return nil, 0, 0, ErrUnsupportedStorage }

func checkAncestor(string, uint32) error { return ErrUnsupportedStorage }

func createFailure(error) string { return "" }

const oNoFollow = 0

var companions = []string{"-journal", "-wal", "-shm"}

//go:build !unix

package publish

import "errors"

var (
	errUnsafe   = errors.New("unsafe file")
	errTooLarge = errors.New("file too large")
)

// Ownership checks need Unix file owners; elsewhere everything is refused.
func checkDir(string) error                         { return errUnsafe }
func readPrivateFile(string, int64) ([]byte, error) { return nil, errUnsafe }
func checkExecutable(string) error                  { return errUnsafe }
func checkWorktree(string) error                    { return errUnsafe }

//go:build !unix

package store

// StatSpace is unsupported where file databases are.
func StatSpace(string) (Space, error) { return Space{}, ErrUnsupportedStorage }

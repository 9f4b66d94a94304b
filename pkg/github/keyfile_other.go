//go:build !unix

package github

import (
	"crypto/rsa"
	"errors"
)

// ErrKeyFileUnsafe: the App key file or its directory breaks the
// file-safety rule of LoadPrivateKeyFile.
var ErrKeyFileUnsafe = errors.New("github: the private key must be an owned regular 0600 file in an owned directory that is not group/world writable")

// Errors of ReadProtectedFile.
var (
	ErrFileUnsafe   = errors.New("github: the file must be an owned regular 0600 file in an owned directory that is not group/world writable")
	ErrFileTooLarge = errors.New("github: the file is too large")
)

// ReadProtectedFile needs Unix file owners; elsewhere it refuses.
func ReadProtectedFile(string, int64) ([]byte, error) { return nil, ErrFileUnsafe }

// LoadPrivateKeyFile needs Unix file owners; elsewhere it refuses.
func LoadPrivateKeyFile(string) (*rsa.PrivateKey, error) { return nil, ErrKeyFileUnsafe }

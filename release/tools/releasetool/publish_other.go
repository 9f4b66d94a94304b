//go:build !(linux && (amd64 || arm64))

package main

import "errors"

// publish is only implemented where renameat2 RENAME_NOREPLACE is available.
func publish(from, to string) error {
	return errors.New("publishing requires Linux renameat2 on amd64 or arm64")
}

//go:build !linux || !(amd64 || arm64)

package install

import "errors"

// renameNoReplace needs Linux renameat2 on amd64 or arm64.
func renameNoReplace(from, to string) error {
	return errors.New("publication requires Linux renameat2 on amd64 or arm64")
}

//go:build !amd64

package main

import "os"

// foreignKinds is empty here: the compat table of other architectures is
// not probed.
func foreignKinds() []string { return nil }

func foreignMain([]string) { os.Exit(2) }

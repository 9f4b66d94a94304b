//go:build !amd64

package main

import "os"

// foreignChmod has nothing to try here: the compat table of other
// architectures is not probed.
func foreignChmod(string, uint32) map[string]bool { return nil }

func int80Main([]string) { os.Exit(2) }

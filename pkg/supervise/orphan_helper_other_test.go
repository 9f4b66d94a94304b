//go:build !linux

package supervise_test

// orphanHelperEnv is unused here: the orphan test is Linux only.
const orphanHelperEnv = "FORGE_SUPERVISE_ORPHAN_HELPER"

func orphanHelper(string) int { return 1 }

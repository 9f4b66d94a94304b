//go:build !linux

package supervise_test

// orphanHelperEnv is unused here: the orphan test is Linux only.
const orphanHelperEnv = "FORGE_SUPERVISE_ORPHAN_HELPER"

func orphanHelper(string) int { return 1 }

// selfHelperEnv is unused here: the Self test is Linux only.
const selfHelperEnv = "FORGE_SUPERVISE_SELF_HELPER"

func selfHelper() int { return 1 }

// delegateHelperEnv is unused here: cgroups are Linux only.
const delegateHelperEnv = "FORGE_SUPERVISE_DELEGATE_HELPER"

func delegateHelper() int { return 1 }

// Package seccomptest stands in, for tests, for a service manager whose
// system call filter refuses seccomp(2): what a Worker unit without
// `seccomp` in its SystemCallFilter= does to the sandbox's metadata guard.
package seccomptest

// Package gitx runs git for the Worker and the Gate with an isolated,
// explicit environment and bounded resources. It is the one way either
// daemon invokes git.
//
// Every invocation goes through pkg/supervise: its own process group, a
// timeout (the policy's git_timeout), one output budget (git_output_bytes)
// over stdout and stderr, and stderr kept privately (never forwarded). The
// child sees only the environment this package builds:
//
//   - GIT_CONFIG_NOSYSTEM=1 and GIT_CONFIG_GLOBAL=/dev/null: no system or
//     user configuration; only the repository's own config applies, and the
//     command-line overrides below win over it;
//   - HOME and XDG_CONFIG_HOME set to a private directory the caller owns;
//   - GIT_TERMINAL_PROMPT=0, GIT_ASKPASS=/bin/false, no pager
//     (GIT_PAGER=cat and --no-pager), LC_ALL=C, GIT_ATTR_NOSYSTEM=1,
//     GIT_NO_REPLACE_OBJECTS=1, no graft file
//     (GIT_GRAFT_FILE under /dev/null), a fixed PATH;
//   - plus whatever the caller adds explicitly (commit identities, dates).
//
// and these configuration overrides on every command line:
// core.hooksPath=/dev/null (no hooks), core.fsmonitor=false,
// credential.helper= (no credential helpers), protocol.allow=never (no
// transport, so nothing can fetch or push), commit.gpgSign=false,
// gc.auto=0 and maintenance.auto=false (no background maintenance),
// advice.detachedHead=false.
//
// A command that sets Cmd.HTTPS (the Gate's public-source fetches, and
// nothing else) additionally carries protocol.https.allow=always, which
// opens the https transport alone, and http.followRedirects=false. It has
// no credential helper and no prompt (GIT_TERMINAL_PROMPT=0,
// GIT_ASKPASS=/bin/false), so a server asking for credentials fails it at
// once. Its failure is classified from git's private stderr into a fixed
// Error.Transport word (redirect, credentials_required, not_found, …).
//
// A command that sets Cmd.Bundle (reading a bundle file the caller wrote:
// a base sent to a Worker, a candidate sent to the Gate) carries
// protocol.file.allow=always instead, and nothing else. ReadBundleHeader
// parses such a file's header strictly before git ever sees it.
//
// A Runner with MemoryBytes (the Gate's git on a candidate a Worker sent)
// starts each git through /bin/sh, which sets RLIMIT_DATA with ulimit -d
// and then executes git in its place: the bound holds from git's first
// instruction, whatever git reads first. A git past it dies as on any
// refused allocation ("Out of memory"), which OutOfMemory recognises.
//
// Errors are *Error values holding only the fixed subcommand name, a
// fixed reason and the exit code: never argv values, paths, environment
// values or git's output.
package gitx

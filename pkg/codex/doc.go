// Package codex is the Codex CLI adapter behind forge-codex-plugin: it runs
// `codex exec` non-interactively in a workspace, bounded in time and
// output, and turns its structured final message into an optional commit
// subject and agent report. It never commits and never claims business
// success: a completed run only means the edit step ran; the Worker
// validates the workspace, runs the checks and commits.
//
// # Invocation
//
// The executable is CODEX_BIN, or "codex" looked up in the PATH of the
// environment Codex will get (only absolute PATH entries are searched). It
// runs with exactly this argv (flags of codex-cli 0.169.0, checked against
// its --help):
//
//	codex exec --cd WORKSPACE --sandbox workspace-write --ephemeral
//	    --ignore-user-config --ignore-rules -c approval_policy="never"
//	    -c sandbox_workspace_write.network_access=false --json
//	    [--output-schema DIR/schema.json --output-last-message DIR/last-message.json] -
//
// The prompt goes to stdin ("-"). The two output flags appear only when a
// commit subject or an agent report was negotiated; DIR is a private 0700
// directory created for the run and removed afterwards (forge-codex-plugin
// makes it in its own working directory when the Worker gave it a private
// one, outside the temporary directories the sandbox lets Codex write).
// --ignore-user-config
// keeps $CODEX_HOME/config.toml (models, providers, MCP servers, hooks,
// sandbox defaults) from silently changing the run boundary; authentication
// still comes from CODEX_HOME. --ignore-rules does the same for user and
// project execpolicy .rules files, which could otherwise allow commands. The -c overrides and --sandbox take
// precedence over any project configuration, so the sandbox, the approval
// policy and the network switch are the adapter's, not the repository's.
// --skip-git-repo-check is deliberately absent: the workspace is a Git
// worktree, and a workspace that is not one is refused by Codex itself.
// The working directory is the workspace; the environment is the plugin's
// own, which the Worker already restricted to its allowlist.
//
// Codex runs in its own process group (under the supervise subreaper
// wrapper when Config.Reaper is set), with a timeout slightly below the
// request's (a margin of a tenth, at most 5 s, is kept so the plugin can
// stop Codex and answer before the Worker's own deadline), and one
// combined budget for stdout and stderr (DefaultOutputLimit). Cancellation
// or timeout sends SIGTERM, then SIGKILL to the group after KillGrace
// (1 s by default; under the wrapper, Codex itself is killed 300 ms after
// SIGTERM and its leftover descendants swept before the wrapper exits).
// Stderr is kept privately (a few KiB) and dropped; stdout is parsed as
// events and dropped. Neither is ever forwarded or put into an error.
//
// # Prompt
//
// Prompt wraps the task instruction in fixed Worker constraints: stay
// inside the workspace, no Git command that changes history, refs, the
// index's branch or configuration, no commits; repository instructions
// (AGENTS.md and the like) may guide the work but never override the task
// or these constraints, authorize commits or reach outside the workspace;
// any validation Codex runs is advisory. When a description is wanted, it
// asks for a final JSON message describing the actual diff.
//
// # Structured output
//
// Schema builds the JSON Schema passed with --output-schema: an object
// with exactly the negotiated properties, all required, no others:
// "commit_subject" (string) when commit_subject was negotiated, "summary"
// (string) and "changes" (array of strings) when agent_report was. Length
// and count limits are stated in descriptions and the prompt, and enforced
// here rather than in the schema.
//
// ParseFinal reads the final message (at most FinalMessageBytes) with
// pkg/strictjson. Fallback rules, never inventing text:
//   - missing file, oversized, not strict JSON, unknown, missing or
//     unwanted fields, wrong types or null: no subject and no report;
//   - otherwise the subject is kept only if plugin.CheckCommitSubject
//     accepts it, and the report only if plugin.CheckReport accepts it,
//     each independently; nothing is trimmed or repaired.
//
// An invalid description never fails the edit: the Worker then uses its
// default subject and stores no report.
//
// # Events
//
// With --json Codex writes one JSON object per line. EventType reads only
// the top-level "type" (valid UTF-8, one object, unique top-level keys, no
// trailing data, at most MaxEventBytes per line; nested values are not
// interpreted, except that the "type" of a top-level "item" object is read
// to count error items). The adapter acts on three kinds: turn.started
// (progress "working"), turn.completed (provider completion) and
// turn.failed (provider failure). An "error" event (Codex reporting a
// dropped stream it retries, "Reconnecting... 1/5 (…)") and an
// item.completed whose item is of type "error" (a transport fallback,
// missing model metadata) are diagnostics: Codex goes on with the turn, so
// they are counted and never decide the outcome; their text is never
// forwarded. thread.started and the other item.* events are known and
// ignored. Unknown types are counted and ignored: the adapter is never
// asked to act on them, and the run's outcome is decided by the known
// completion events, so an unknown event cannot make a run succeed. A line
// that is not a JSON object with a string type, or is too long, makes the
// whole stream untrustworthy: the run fails closed and Codex is stopped.
// Event streams captured from the real codex-cli 0.169.0 are replayed in
// the tests (testdata/events).
//
// # Outcome
//
// A run succeeds only when Codex exits 0, the stream is well formed, at
// least one turn.completed arrived and no turn.failed did (error events and
// error items before the completion do not matter).
// Failures are *Error values with a fixed Reason and a protocol category:
// the workspace is not a directory → invalid_request; Codex not found or
// not startable → incompatible (the plugin cannot serve in this
// environment; a failed run is reserved for work that was attempted);
// nonzero exit, timeout, output limit, malformed stream, provider failure
// or missing completion → execution_failed; the caller's context ending →
// cancelled.
//
// Progress is fixed lifecycle text only: "codex started" (started) once
// Codex runs, "codex editing" (working) at the first turn.started, "codex
// finished" (finalizing) after a successful exit. Executor output never
// reaches progress.
package codex

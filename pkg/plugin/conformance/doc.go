// Package conformance is the plugin protocol v1 conformance suite behind
// forge-plugin-conformance: a table of scenarios and the harness that runs
// each one against a plugin executable in a fresh process.
//
// # Harness
//
// Every scenario starts the plugin anew through pkg/supervise, as the
// Worker does: exactly the environment the caller passes, its own process
// group, stdin and stdout as pipes, stderr kept privately and never judged,
// and, when Config.Reaper is set (Linux), the Worker's child-subreaper
// wrapper. The harness writes the scenario's bytes to stdin, reads stdout
// with the protocol's bounded frame reader, and judges every frame with
// pkg/plugin (DecodeFrame for compactness, exact fields and values; a
// Session for id, order, negotiation and progress numbering). When the
// plugin exits, the rest of its group is killed, and under the wrapper
// every descendant it left, setsid ones included, is swept before the exit
// is reported; so, as in the Worker, a descendant still holding stdout does
// not fail a plugin that exited properly, and none outlives its scenario.
// Without a reaper only the group is cleaned up. A scenario that outlives
// its bound is killed and fails with "timeout".
//
// # Expectations
//
// A valid session (ExpectSession) negotiates, executes, and must end with
// exactly one terminal frame; the harness then closes stdin and requires a
// clean stdout EOF and exit 0 within 250 ms (host.ExitWindow). The session
// that cancels requires the terminal frame, clean stdout EOF and exit 0
// within that same window after the cancel, the drain time the Worker
// allows before it terminates the plugin. In workspace_edit mode the
// request names a fresh one-commit git repository, and a result must leave
// the working tree changed and HEAD unmoved.
//
// An invalid initialization (ExpectSilentExit) must leave stdout empty and
// end in a nonzero exit. An invalid execution (ExpectInitializedExit) may
// only be preceded by the initialized frame, which must be valid and equal,
// apart from the id, to the plugin's answer to the same offer in an earlier
// valid session. A frame that breaks the order after a complete valid
// execute (ExpectLateReject) may race the plugin's answer, so one valid
// terminal frame (after negotiated progress) is tolerated before the
// nonzero exit. Stdin stays open while the harness waits for the exit, so a
// plugin must reject invalid input when it reads it, not at end of input;
// only scenarios about a truncated stream close stdin early. Malformed
// lines are followed by valid frames a lenient plugin would answer, so
// leniency shows up as output. In workspace_edit mode a rejected request
// must leave the workspace untouched.
//
// Failure reasons are fixed texts, counts and pkg/plugin errors; they never
// echo plugin output.
package conformance

// Package conformance is the plugin protocol v1 conformance suite behind
// forge-plugin-conformance: a table of scenarios and the harness that runs
// each one against a plugin executable in a fresh process.
//
// # Harness
//
// Every scenario starts the plugin anew with exactly the environment the
// caller passes, in its own process group, with stdin and stdout as pipes
// and stderr discarded (it is the plugin's private diagnostics). The
// harness writes the scenario's bytes to stdin, reads stdout with the
// protocol's bounded frame reader, and judges every frame with pkg/plugin
// (DecodeFrame for compactness, exact fields and values; a Session for id,
// order, negotiation and progress numbering). When the leader exits, the
// rest of its group is killed before the leader is reaped; a scenario that
// outlives its bound is killed and fails with "timeout".
//
// # Expectations
//
// A valid session (ExpectSession) negotiates, executes, and must end with
// exactly one terminal frame; the harness then closes stdin and requires a
// clean stdout EOF and exit 0 within 250 ms. In workspace_edit mode the
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

// Package host is the Worker side of plugin protocol v1: it runs one
// operation in a fresh plugin process and judges everything the plugin
// says. The Worker and the conformance suite both use Run.
//
// Run starts the plugin through pkg/supervise with exactly the given argv,
// environment and directory, its own process group, private bounded stderr,
// one combined stdout+stderr budget and, on Linux when Command.Reaper is
// set, the child-subreaper wrapper that cleans up every descendant. It then
// drives the session (see pkg/plugin for the frame rules):
//
//  1. send initialize with the offer and the exact v1 limits;
//  2. require initialized: a subset of the offer that includes the
//     operation's capability;
//  3. send exactly one execute;
//  4. accept progress frames, each validated (negotiated, consecutive,
//     within count and byte limits, UTF-8) before the callback sees it,
//     until exactly one result or failure, validated against the
//     negotiation;
//  5. close stdin and require clean stdout EOF and exit status 0 within
//     250 ms; any trailing byte or frame, or a nonzero exit, is a protocol
//     violation.
//
// # Cancellation and precedence
//
// When ctx ends (or Command.Timeout elapses) after execute was sent, Run
// sends exactly one cancel frame if cancel was negotiated (otherwise it
// terminates the plugin at once), allows 250 ms to drain, then terminates
// and waits for cleanup. Run always returns after the plugin and, with the
// wrapper, its descendants have been reaped.
//
// The outcome is decided deterministically when Run is about to return:
//
//   - processes of a contained plugin (supervise.ReaperPool.Contain) that
//     survived its cgroup's kill win over everything (KindSurvivors);
//   - an output-limit violation wins if Run selected it while the context
//     was still live (Run checks ctx.Err() before selecting it);
//   - otherwise a context that has ended wins (KindCancelled), over a
//     concurrent success, a plugin failure, exchange errors and the exits
//     that cleanup causes;
//   - otherwise an elapsed Command.Timeout wins (KindTimeout);
//   - otherwise the session's own result: success, KindFailure,
//     KindProtocol; a success whose terminal frame was read only after
//     the plugin, contained, had exited while a process it left held its
//     stdout is KindProtocol instead (the frame may be that process's,
//     written after the plugin's end).
//
// Errors are *Error values with a Kind the Worker maps to a disposition.
// Their messages are fixed texts; they never contain plugin output, stderr,
// argv, paths or environment values.
package host

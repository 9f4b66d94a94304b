// Package activity implements live operator activity (live_activity/v1):
// a short, closed sequence of coarse stages that tells an operator watching
// a running attempt what it is doing, and nothing else.
//
// # Stages
//
// The stages are closed and ordered: analyzing, editing, testing,
// preparing_result. An attempt moves through them strictly forward, so it
// produces at most four events.
//
// # Negotiation
//
// A Worker lane offers the versions it implements in its hello
// (activity_versions). A Gate selects Version in a lease only when the offer
// contains it (Select); an absent selection disables activity for that
// attempt. A Worker refuses, before executing anything, a lease that selects
// a version it does not know (Known).
//
// # Worker side: Tracker
//
// One Tracker per attempt turns the pipeline's signals into stages:
//
//   - plugin progress started → analyzing, working → editing; the
//     progress text is never looked at; finalizing does not move the stage
//     (the Worker's checks have not run yet);
//   - a non-empty declared-check batch → testing before its first check,
//     then preparing_result once the batch ends, whether it passed or
//     stopped at the first failure; an empty check list produces neither;
//   - a stage at or below the current one is dropped, and never more than
//     MaxEvents are emitted.
//
// An event is a Payload: job id, attempt id, version and stage. There is no
// field for text, so command names, output, prompts, payloads and plugin
// timestamps cannot enter it.
//
// # Gate side: Store
//
// The Store keeps activity in memory only; it is never written to SQLite,
// evidence or delivery records, and is lost when the Gate restarts. Begin
// registers a lease that selected a version; Record accepts a payload only
// for the exact (job, attempt, lane, connection generation) of that lease,
// with the selected version, strictly before the current deadline (Extend
// moves it on every accepted heartbeat) and strictly advancing; it stamps
// the receive time from the injected clock. End (terminal result, cancel),
// DropConnection (disconnect) and expiry remove an attempt's entry.
//
// The Store holds at most MaxEntries attempts of at most MaxEvents events.
// When it is full, Begin first drops expired entries and then evicts the
// entry registered longest ago: a new lease is always tracked, because the
// oldest entries are the ones most likely to belong to attempts the Gate
// has already lost track of. Every method is safe for concurrent use.
package activity

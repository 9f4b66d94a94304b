// Package worker is the Worker side of Agent Forge: its configuration
// (worker.json), its lanes (one outbound WebSocket per concurrency slot),
// lease execution through per-kind executors (one contract,
// Execute(ctx, *Attempt): the attempt carries the lease, the evidence
// binder, the stage reporter and the Observe hook), and the mapping from
// plugin outcomes to attempt results.
//
// # Configuration
//
// LoadConfig strictly decodes worker.json (pkg/configfile: no unknown,
// duplicate or case-variant keys, no nulls, no trailing data) and checks
// its shape: version 1; gate_url a ws:// or wss:// origin without path,
// query, fragment or userinfo; safe ids (ident.ValidID, so never '#');
// absolute, Clean paths; repository roots neither duplicated nor nested;
// repositories strictly inside a root, ids and paths unique; worktree and
// runtime roots outside the repository roots and each other; plugin argv
// with an absolute argv[0] and an optional sha256 of 64 lowercase hex;
// environment names [A-Za-z_][A-Za-z0-9_]*, unique;
// check_environment_allowlist (optional) a subset of environment_allowlist;
// every ceiling present and positive. CheckHost then checks the machine:
// the token variable is set to a non-empty visible-ASCII value, every
// plugin executable exists, is executable and matches its pin,
// repositories and roots are existing directories whose path is their real
// path, and worktree_root and runtime_root exist (the last element is
// created 0700 when missing). Every error is a *ConfigError naming the
// field with fixed text; no path, argv, token or digest is ever in it.
//
// # Lanes
//
// Run starts Concurrency lanes (slot 0..N-1). Each lane dials Gate
// (wire.Dial, Authorization: Bearer), sends hello (worker id, slot, plugin
// ids, repository ids), and waits for welcome. An idle lane accepts only
// lease and cancel (anything else closes the connection); a cancel for an
// attempt the lane does not run, idle or busy, is answered with idle for
// that attempt, so the Gate never waits for the lane to wind down
// something it is not running.
// A lease runs in its executor while the lane heartbeats every
// heartbeat_interval. The lease is lost, and the executor's context is
// cancelled, when a heartbeat is rejected (any code but unavailable), when
// Gate sends cancel for the attempt, when a heartbeat stays unanswered for
// max(3 × heartbeat_interval, 10 s), or when the connection ends (which is
// how a same-slot takeover reaches the old connection). The plugin runner
// turns that cancellation into one cancel frame, a 250 ms drain and its
// cleanup. A lost lease is never reported: once the executor has
// returned the lane sends idle for it, and only then may Gate lease it
// again; otherwise the lane sends one result and waits for Gate's ack or
// reject, after which it is idle again. A result or evidence batch the
// Gate refuses unavailable (it could not record it: its disk is full) is
// sent again, the result every heartbeat_interval, a batch with the next
// heartbeat, so the Gate's full disk costs no work.
// A lane never starts a second attempt before the first has returned, and
// lanes share nothing. When a connection ends the lane reconnects after a
// capped exponential backoff with jitter (ReconnectBase doubling up to
// ReconnectCap, uniformly drawn in [d/2, d]; reset only by a welcomed
// session that lasted 30 s, so two processes fighting over one lane back
// off instead of flapping). A welcome must name the lane the slot asked for.
//
// When Run's context ends (SIGTERM/SIGINT in forge-worker), every lane
// sends goodbye (naming the attempt it runs, if any) and never starts
// another lease, even one already received (Gate returns it to the queue
// without consuming an attempt). An executing lane cancels its attempt and
// reports it as CodeWorkerShutdown (retryable) unless it had already
// succeeded; Gate records that result without leasing the next job. The
// lane waits (bounded) for the answers to its goodbye and result, then
// closes.
//
// # Executors and failure codes
//
// Each job kind has an Executor; a lease of a kind without one fails with
// CodeUnsupportedKind (terminal). TextExecutor runs text jobs;
// CodingExecutor (coding.go, which documents its pipeline) runs coding
// jobs and binds evidence through the lane before its result. Lanes
// advertise repositories only when a coding executor is installed
// (forge-worker installs one when repositories are configured), so Gate
// does not route coding jobs to a text-only Worker.
//
// TextExecutor decodes the task and the canonical policy, then fails closed
// (terminal, before anything starts) on an unknown plugin id, a requested
// environment variable outside environment_allowlist, or any of the seven
// policy limits above its local ceiling. The plugin's environment is
// exactly the requested, allowlisted variables that are set in the
// Worker's own environment. When the plugin entry has a sha256, the
// executable is hashed before every invocation; a mismatch or an
// unreadable file is CodePluginIdentityMismatch (terminal). The digest is
// deliberately not cached by file identity (device, inode, size, times):
// that would miss an in-place rewrite within one timestamp tick, so the
// pin costs one full read and hash per invocation (about 0.8 ms per MiB on
// a 2-core VM; BenchmarkPluginDigest, e2e-pinned-jobs/s). Each
// invocation runs in a fresh private directory under runtime_root (its
// working directory, removed afterwards) with plugin_timeout,
// plugin_output_bytes and cleanup_timeout (the kill grace) from the
// policy. Runner outcomes map to retryable codes: protocol violation,
// plugin failure frame, timeout, output limit, spawn failure.
//
// Every code is a row of the wire protocol's closed failure table
// (wire.DispositionOf) and goes to Gate as itself in the result's
// failure_code, with the disposition the table fixes; coding-pipeline
// failures get the specific code of their evidence phase and reason. Plugin stdout
// (other than the text result itself), stderr, argv and paths never reach
// Gate or the logs.
//
// Live activity (live_activity/v1, activity.go): every lane offers the
// version in its hello; a lease that selects an unknown version or carries
// an activity payload fails with invalid_activity before anything runs.
// Otherwise the lane hands the attempt an activity.Tracker
// (Attempt.Stages): plugin progress stages (text discarded) and the
// coding check batch move it forward, and the lane sends each stage as an
// activity message while it holds the lease.
package worker

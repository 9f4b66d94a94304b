// Package gate is the Gate server: the owner HTTP API (docs/api.md), the
// Worker WebSocket endpoint and its lane registry, push dispatch of leases,
// and the expiry sweep, all on top of pkg/store (authoritative state) and
// pkg/wire (the Worker protocol, docs/wire-protocol.md).
//
// Startup order: open the store (migrations), listen (one "listening" log
// event with the bound address), mark every lane disconnected, run one
// expiry sweep; only then do /readyz, the owner routes and the Worker
// endpoint stop answering 503 not_ready. The sweep repeats every
// recovery_interval, and sooner when a deadline or retry falls due; a sweep
// or store failure stops the Gate with an error instead of running without
// recovery, except for lack of space: a full state file system (below its
// free-space floor, or a write SQLite refused for it) puts the Gate in the
// read-only storage_full mode until space is back (storage.go).
//
// Lanes: every authenticated connection that says a valid hello becomes
// one lane (worker-1, worker-1#1, …) with a fresh random generation. The
// store records the generation and the registry installs the connection
// under one lock, so a same-slot takeover fences the old generation in the
// store and closes the old socket, and the old connection's disconnect
// (compare-and-clear) never marks the newcomer offline. A lane's dispatch
// state changes only through the named transitions of lanestate.go: idle,
// reserved (one store Lease call in flight), busy (one attempt), recording
// (its result being stored; every answer to it, ack or reject, ends busy),
// winding (cancelled, until the Worker's idle; closed, connection dropped,
// after windingLimit), closed; and draining once the Worker said goodbye, after which nothing is
// leased to it and a lease it holds but does not run goes back to the
// queue (store.Release) without consuming an attempt. Each
// connection costs one goroutine: the WebSocket is taken over from the HTTP
// handler (wire.Accept) and read by the lane's own goroutine.
//
// Dispatch is push: a submit wakes one idle lane that fits the job (pool,
// plugin, repository); a lane asks for work after welcome and after the
// Worker's idle that follows a cancel; a result for the lane's current attempt is recorded together
// with the lane's next lease in one store operation (CompleteAndLease: one
// commit), and that lease is sent right after the result's ACK. A sweep
// that expired something or ran because a retry fell due wakes every idle
// lane. A wake that reaches a lane while it is asking, or while its result
// is being recorded, makes it ask once more. lease_poll_interval only
// re-checks a few idle lanes per tick in rotation, as a safety net. Acks
// and leases are encoded without reflection (wire.EncodeAck, and each
// lane's wire.LeaseEncoder, which checks the policy document its leases
// share once); an ack and the lease that follows it go out in one write
// (wire.Conn.SendEncodedBatch).
//
// The debug viewer (pkg/debugview) is mounted at /debug/ (static shell)
// and /v1/debug/ (owner-only reads, the same owner check as the API).
// GET /metrics (owner token) answers the Prometheus text format from
// memory and the store's indexes of live rows (metrics.go).
//
// Fencing is the store's: heartbeat, evidence and result are written with
// the (job, attempt, lane, generation of this connection) fence, and the
// store's typed rejections map to wire reject codes in one place
// (rejectStoreErr); owner API errors map in one place too (toAPIError).
package gate

// Package gate is the Gate server: the owner HTTP API, the Worker
// WebSocket endpoint and its lane registry, push dispatch of leases, and
// the expiry sweep, all on top of pkg/store (authoritative state) and
// pkg/wire (the Worker protocol).
//
// Startup order: open the store (migrations), mark every lane
// disconnected, run one expiry sweep, then serve; /readyz answers ready
// only after that. The sweep repeats every recovery_interval (sooner when a
// retry or deadline falls due); a sweep or store failure stops the Gate
// with an error instead of running without recovery.
package gate

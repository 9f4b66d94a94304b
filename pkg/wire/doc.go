// Package wire is the Gate⇄Worker protocol forge-wire/v1: message types,
// strict size-bounded decoding, validation, encoding, and the WebSocket
// plumbing both ends share (a bounded codec for golang.org/x/net/websocket,
// the Worker's authenticated dial). docs/wire-protocol.md is the prose
// contract; this comment summarises who may say what, and what is fatal.
//
// # Transport
//
// A Worker dials Path once per lane with "Authorization: Bearer <worker
// token>". Gate checks the token before the upgrade (401, no upgrade). Every
// WebSocket text frame carries exactly one Envelope of at most
// MaxMessageBytes, decoded with pkg/strictjson and then validated.
// Anything that fails decoding or validation is a protocol violation: the
// receiver closes the connection without replying.
//
// # Conversation of one lane
//
//	Worker                       Gate
//	hello{worker_id,slot,…}  →
//	                         ←   welcome{lane,generation}     lane idle
//	                         ←   lease{job,attempt,…}         lane busy
//	heartbeat seq=n          →
//	                         ←   ack seq=n {deadline_at}  |  reject seq=n {code}
//	activity{job,attempt,…}  →   (optional, no seq, no answer)
//	evidence seq=n (coding)  →
//	                         ←   ack seq=n  |  reject seq=n {code}
//	result seq=n             →
//	                         ←   ack seq=n  (lane idle again)  |  reject seq=n
//	                         ←   cancel{job,attempt,reason}   lease gone; lane winds down
//	idle{job,attempt}        →   (the cancelled attempt has stopped: lane idle)
//	goodbye seq=n {job,attempt}? →                            lane stopping: lease nothing more
//	                         ←   ack seq=n
//
// hello is the first and only hello on a connection. Gate sends lease only
// to an idle lane that has not said goodbye, so at most one attempt is in
// flight per connection. A lane is busy from a lease until its result
// (answered either way) or its idle for that attempt: a cancel asks the
// Worker to stop, and the Gate leases the lane again only once the Worker
// says the old executor has returned. goodbye names the attempt the lane
// still runs, if any; from then on the Gate records its result without
// leasing the next job, and returns any other lease the lane holds to the
// queue before the ack, without consuming an attempt. A stopping Worker
// never starts a lease. heartbeat, evidence, result and goodbye carry a
// seq (≥ 1) that the Gate echoes in its ack or reject; lease, cancel,
// hello, welcome, activity and idle carry none.
// Live activity (pkg/activity) is negotiated by hello.activity_versions and
// lease.activity_version; Gate never answers an activity message. A reject
// without seq is a connection-level refusal (for example a hello for a slot
// the token does not own); the Gate closes the connection after sending it.
//
// # Fencing
//
// The connection is the fence: Gate binds each request to the lane and the
// random generation of the connection that sent it, and the database write
// that would record it checks (job, attempt, lane, generation), that the
// attempt is still leased and that its deadline has not passed, all in one
// transaction. A newer connection for the same lane fences the older
// generation; the older socket is closed and nothing it sends afterwards is
// accepted. Reject codes tell the Worker why: stale, expired, conflict,
// invalid, unavailable.
//
// # Failures
//
// A failed result names one code of a closed table (DispositionOf,
// FailureCodes) with the disposition the table fixes for it. The decoder
// checks only the code's shape; the receiver checks the pair
// (CheckFailure), and Gate answers an unknown code or a mismatched
// disposition with reject invalid.
package wire

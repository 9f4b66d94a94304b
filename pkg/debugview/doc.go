// Package debugview is the Gate's read-only debug viewer: an embedded,
// dependency-free HTML/CSS/JS shell and the owner-only JSON routes it reads.
//
// Mount the handler from New on both prefixes:
//
//	h := debugview.New(debugview.FromStore(st, poolOf), isOwner, now,
//		debugview.WithActivity(activityStore))
//	mux.Handle("/debug/", h)    // public static shell, no state
//	mux.Handle("/v1/debug/", h) // owner-only JSON, GET only
//
// FromStore adapts pkg/store's debug reads; package readertest holds the
// Reader conformance check and an in-memory Reader for tests.
//
// Routes:
//
//	GET /debug/                 index.html (also /debug/app.js, /debug/app.css)
//	GET /v1/debug/jobs          {"jobs":[job…],"next_cursor"?,"as_of"}
//	GET /v1/debug/workers       {"lanes":[lane…],"next_cursor"?,"as_of"}
//	GET /v1/debug/jobs/{id}     {"job":job,"attempts":[attempt…],"events":[event…],"next_cursor"?,"as_of"}
//	GET /v1/debug/jobs/{id}/activity
//	                            {"live":bool,"activity":[{"attempt","attempt_id","worker_id","stage","at"}…],"as_of"}
//
// Live activity (WithActivity) is read from the Gate's memory only: the
// stages of the job's live attempts, nothing else; a job without live
// activity is looked up only to answer 404 when it does not exist. The page
// polls the route every five seconds while a job drawer is open,
// independently of the listings.
//
// The JSON routes require the authenticate callback to accept the request
// (the Gate checks the owner bearer token), otherwise 401. Any method but
// GET is 405. Query parameters are limited to limit (1..100, default 25) and
// cursor; anything else, a repeated parameter, or a cursor this process did
// not issue for the same route is 400. Errors use the owner API's body
// {"error":{"code":…,"message":…}}.
//
// Jobs are listed newest first; lanes by name; a job's timeline events by
// sequence, where limit and cursor page the events and attempts are listed
// in full (at most 100).
//
// Cursors are opaque and tamper-evident: base64url(position) "."
// base64url(HMAC-SHA256(key, route tag || position)) with a random key made
// per handler, so they stop working when the Gate restarts.
//
// Records are allowlists (see the view types): identifiers, kind/status,
// bounded failure codes, timestamps (RFC 3339 UTC, microseconds),
// connection state, the exact base SHA, event type/time, an attempt's
// model gateway usage (four counts; the page shows each attempt's and
// their sum as the job's). Task inputs,
// instructions, tests, repository paths, results (for a coding job that
// is its candidate SHA, DECISIONS 7), plugin or check output, evidence,
// authorization values and event details never reach these types, so they
// cannot be rendered. The routes only read.
//
// The page keeps the owner token in one JavaScript variable (the password
// field is cleared at once) and sends it only as `Authorization: Bearer`;
// it renders with textContent only, under a strict Content-Security-Policy.
package debugview

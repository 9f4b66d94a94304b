// Package gateway is the Worker's model gateway (DECISIONS 19): the one
// way an attempt reaches a model provider, so that no provider key is
// ever in the attempt's seat.
//
// The operator declares providers in worker.json (ParseProviders): an
// id, the API kind, the upstream https base URL, the name of the
// environment variable holding the key, and optional extra headers. The
// Worker reads the keys at startup (it is non-dumpable) and serves every
// provider on one loopback port (Listen): provider ID's API is under
// http://127.0.0.1:PORT/ID, so an agent's base URL is
// ProviderURL(URL, ID) and a request for /ID/REST goes to the provider's
// base URL + /REST.
//
// Each attempt gets a Grant (Issue): a random credential
// ("fgw-" + 64 hex digits) the agent presents as its API key, valid for
// every provider from Issue until Revoke, which the Worker calls when
// the attempt's lease ends (the executor returned, or the lease was
// lost): from then on the credential is refused and the grant's requests
// still in flight are cut. A credential is looked up by its SHA-256 and
// compared in constant time.
//
// One request:
//
//   - the path must be plain and clean and name a provider (else 400 or
//     404); the credential comes from "Authorization: Bearer", else
//     "x-api-key", else "x-goog-api-key" (401 when it is not a live
//     grant's);
//   - the body is bounded (MaxRequestBytes: 413); a grant with a token
//     budget forwards one request at a time (the others wait: a
//     request's cost is known only from its answer, so requests in
//     flight together could each spend what is left); the grant's
//     budget is checked before the request is forwarded (403
//     budget_exceeded). Once a request is refused so, or the usage the
//     answers reported goes past the token budget, the grant is exceeded:
//     Exceeded is closed, every later request is refused and those in
//     flight are cut;
//   - the upstream request carries the client's end-to-end headers
//     without hop-by-hop headers, credentials, cookies, Accept-Encoding
//     (the answer must be readable by the meter) or a "key" query
//     parameter, then the operator's extra headers and the key in the
//     header the kind expects (Authorization: Bearer for
//     openai-responses, x-api-key for anthropic-messages, x-goog-api-key
//     for gemini-generate-content);
//   - the upstream is reached with the system's trust roots (Go honours
//     SSL_CERT_FILE and SSL_CERT_DIR), through no proxy; a redirect is
//     never followed (502 upstream_redirect); an unreachable upstream is
//     502 upstream_unreachable;
//   - the answer's status, headers (without hop-by-hop ones) and body go
//     back as they come: every read from the upstream is written and
//     flushed at once, so server-sent events and chunked bodies are
//     neither buffered nor coalesced;
//   - a WebSocket upgrade (the Responses API over WebSocket) of a grant
//     without a budget is forwarded without the client's extension offer
//     (an upstream that selects one anyway is refused: 502
//     upgrade_failed) and then both directions byte for byte; every data
//     message (text or binary) the client sends counts as one request, a
//     frame with a reserved bit set ends the connection. A grant with a
//     budget is refused any upgrade (403 websocket_refused).
//
// Every refusal is a fixed JSON error, never a value from the request,
// the key or the upstream. The meter reads each answer as it passes
// (server-sent event data lines, WebSocket data messages, a JSON body of
// at most 8 MiB) for the provider's usage fields and adds them to the
// grant's Usage: requests, input tokens (all prompt tokens, cached ones
// included), output tokens (reasoning included) and cached tokens.
//
// On a grant with a token budget the meter fails closed: a request that
// may cost tokens (any method but GET, HEAD, OPTIONS and DELETE, except
// the kinds' token counting endpoints) whose 2xx answer did not reach
// the client whole with a usage object the meter read (the client or the
// upstream cut it, its usage was past the meter's bounds, or it had
// none), or that was cut after the provider had it but before its
// answer, exceeds the grant (Unmetered): its cost is unknown (reasoning
// tokens are never streamed, the rest of a cut generation is never
// seen), so it counts as having spent what was left.
package gateway

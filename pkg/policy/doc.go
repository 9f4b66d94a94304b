// Package policy defines the lifecycle and execution policy that Gate
// resolves when it accepts a job, its canonical JSON document, and the
// exponential-v1 retry backoff.
//
// Gate configuration embeds Lifecycle and Execution with the spec's JSON
// shape (durations in Go syntax such as "15m", byte counts as integers).
// At submission Gate calls Resolve, stores Policy.Canonical() on the job and
// copies those bytes unchanged to every attempt; a Worker reads them back
// from a lease with Decode. The canonical document looks like:
//
//	{"schema":"forge-policy/v1",
//	 "lifecycle":{"backoff":"exponential-v1","lease_ttl":"30s","retry_base":"1s","max_attempts":3},
//	 "execution":{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"15m0s",
//	  "check_timeout":"10m0s","git_timeout":"1m0s","cleanup_timeout":"10s",
//	  "plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
//
// (one line, no spaces). A repository with a model budget adds
// "budget":{"attempt":{"max_tokens":N,"max_requests":N},"job":{...}}
// after execution (either part and either limit may be absent); a policy
// without one has no "budget" key. Durations are written with time.Duration.String,
// and the environment and network_allow lists are sorted, so equal
// policies have equal bytes.
//
// Bounds enforced by Validate:
//   - plugin_id: 1..64 bytes of [a-z0-9._-], starting with a letter or digit;
//   - environment: at most 64 names, each 1..128 bytes matching
//     [A-Za-z_][A-Za-z0-9_]*, no duplicates (may be empty);
//   - plugin/check/git/cleanup timeouts: 1ms..24h;
//   - plugin/check/git output bytes: 1..64 MiB;
//   - lease_ttl: 10ms..24h; retry_base: 1ms..24h; max_attempts: 1..100;
//   - budget (optional): attempt and/or job, each naming max_tokens
//     and/or max_requests, each 1..2^50;
//   - network_allow (optional, omitted when empty, sorted): at most 32
//     lower-case host:port pairs (a DNS name, an IPv4 address or a
//     bracketed IPv6 address; a port 1..65535), no duplicates;
//     network_checks (optional) only with network_allow.
package policy
